import SIWAConfiguration
import AccountStore
import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import SIWAServer

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending database migrations (sql/NNN_*.sql), in order.",
        discussion: """
            Each file runs in its own transaction and is recorded in siwa.schema_migrations \
            with its SHA-256; a file changed after it was applied is refused. Safe to run \
            while servers are up, and twice at once (an advisory lock serialises runs).

            Connects as the schema's owner: SIWA_MIGRATE_DATABASE_URL, or SIWA_DATABASE_URL \
            when that is unset (one role for everything: fine for a trial, not for \
            production). Then grants the runtime privileges (sql/004_runtime_role.sql) to \
            the user named in SIWA_DATABASE_URL, the role `siwa serve` and `siwa worker` \
            run as: it can read and write what they need, only INSERT and SELECT on the \
            audit trail, and cannot ALTER, DROP, TRUNCATE or disable a trigger.
            It also records SIWA_PURGE_SLA_HOURS (default 72) in the database, where the audit \
            views read it (siwa.attention, `siwa audit summary`).
            SIWA_MIGRATIONS_DIR overrides where the files are. Only the user name of \
            SIWA_DATABASE_URL is used here, so its password may be left out. Both URLs take \
            sslmode and sslrootcert (see `siwa serve --help`).
            """
    )

    @Option(help: "Directory of the numbered SQL files (default: SIWA_MIGRATIONS_DIR, the installed share/siwa/sql, or the source tree's sql/).")
    var dir: String?

    @Flag(help: "Only report whether the database is up to date (exit 1 if not).")
    var check = false

    func run() async throws {
        let env = SettingsReader()
        Startup.warnUnknownSettings(env)
        let log = Startup.settings { try LogSettings(environment: env) }
        LoggingSetup.bootstrap(log)
        let logger = Logger(label: "siwa.migrate")
        let runtimeURL = env.string(SettingsCatalog.databaseURL)
        let ownerSetting = env.string(SettingsCatalog.migrateDatabaseURL) == nil ? SettingsCatalog.databaseURL : SettingsCatalog.migrateDatabaseURL
        let ownerName = ownerSetting.name
        let url = Startup.settings { try env.required(ownerSetting) }
        let database = Startup.settings(ownerName) { try DatabaseConfiguration(url: url, maximumConnections: 2) }
        let runtime = runtimeURL.map { runtimeURL in
            Startup.settings("SIWA_DATABASE_URL") { try DatabaseConfiguration(url: runtimeURL) }
        }
        let directory = dir.map { URL(fileURLWithPath: $0) } ?? Migrator.defaultDirectory()
        let migrator = Startup.settings { try Migrator(directory: directory) }
        let purgeSLAHours = Startup.settings { try env.integer(SettingsCatalog.purgeSLAHours) }
        await Startup.requireConnection(database, setting: ownerName)
        try await database.withClient { client in
            do {
                if check {
                    try await migrator.checkUpToDate(client: client, logger: logger)
                    print("up to date (\(migrator.migrations.count) migrations in \(directory.path))")
                } else {
                    let applied = try await migrator.migrate(client: client, logger: logger)
                    // The directory too: an installed siwa must be seen to read its own files.
                    print(applied.isEmpty ? "nothing to apply from \(directory.path)"
                                          : "applied from \(directory.path): \(applied.joined(separator: ", "))")
                    try await AuditReports.recordPurgeSLA(hours: purgeSLAHours, client: client, logger: logger)
                    try await grantRuntimePrivileges(owner: database, runtime: runtime, client: client, logger: logger)
                }
            } catch let error as MigrationError {
                Startup.fail("\(error)", code: 1)
            } catch let error as PSQLError {
                Startup.fail("\(ownerName): \(database.redactedDescription): \(database.describe(connectionError: error))", code: 1)
            }
        }
    }

    /// Grants the runtime role its privileges, and says so when serve and
    /// worker would run with more than they need.
    private func grantRuntimePrivileges(owner: DatabaseConfiguration, runtime: DatabaseConfiguration?,
                                        client: PostgresClient, logger: Logger) async throws {
        guard let runtime, runtime.username != owner.username else {
            Startup.warn("""
                siwa serve and siwa worker will connect as \(owner.username), the owner of the schema, \
                which can alter or truncate the audit trail. For production, create a runtime role and name it in \
                SIWA_DATABASE_URL, and give the owner's URL to siwa migrate as SIWA_MIGRATE_DATABASE_URL.
                """)
            return
        }
        try await RuntimeRole.grant(to: runtime.username, client: client, logger: logger)
        print("granted the runtime privileges to \(runtime.username)")
        let problems = try await RuntimeRole.excessPrivileges(of: runtime.username, client: client, logger: logger)
        if !problems.isEmpty {
            Startup.warn("the runtime role \(runtime.username) \(problems.joined(separator: " and ")): it can alter the audit trail")
        }
    }
}
