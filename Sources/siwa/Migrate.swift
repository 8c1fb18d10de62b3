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
            when that is unset. Then grants the runtime privileges (the rows of \
            siwa.runtime_grants) to two roles the operator created beforehand: serve's to \
            SIWA_SERVE_ROLE (default siwa_serve), the worker's to SIWA_WORKER_ROLE (default \
            siwa_worker), revoking anything else they held on siwa's objects. Neither can \
            ALTER, DROP, TRUNCATE or disable a trigger; serve cannot write the audit chain, \
            its seal mark, receipts or a job's steps_done; the worker cannot create API keys \
            or record notifications. Where neither role exists (a one-role trial), both \
            processes' privileges go to the user named in SIWA_DATABASE_URL, as before, and \
            serve and worker warn at start that they share a role.
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
        let env = Startup.reader()
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
        var migrator = Startup.settings { try Migrator(directory: directory) }
        // The team of the rows of a database that predates sql/024.
        migrator.existingRowsTeam = AppleClientsSettings.singleTeam(env)
        let purgeSLAHours = Startup.settings { try env.integer(SettingsCatalog.purgeSLAHours) }
        let roles = Startup.settings {
            RuntimeRoles(serve: try env.text(SettingsCatalog.serveRole), worker: try env.text(SettingsCatalog.workerRole))
        }
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
                    try await grantRuntimePrivileges(owner: database, roles: roles, runtime: runtime, client: client, logger: logger)
                }
            } catch let error as MigrationError {
                Startup.fail("\(error)", code: 1)
            } catch let error as PSQLError {
                Startup.fail("\(ownerName): \(database.redactedDescription): \(database.describe(connectionError: error))", code: 1)
            }
        }
    }

    struct RuntimeRoles {
        let serve: String
        let worker: String
    }

    /// Grants serve's and the worker's roles their privileges; where
    /// neither exists, both sets to the user of SIWA_DATABASE_URL (one
    /// role: a trial). Says so when a role would run with more than it needs.
    private func grantRuntimePrivileges(owner: DatabaseConfiguration, roles: RuntimeRoles, runtime: DatabaseConfiguration?,
                                        client: PostgresClient, logger: Logger) async throws {
        let existing = try await RuntimeRole.existing([roles.serve, roles.worker], client: client, logger: logger)
        let present = [roles.serve, roles.worker].filter(existing.contains)
        if present.isEmpty {
            try await grantOneRole(owner: owner, roles: roles, runtime: runtime, client: client, logger: logger)
            return
        }
        if let missing = [roles.serve, roles.worker].first(where: { !existing.contains($0) }) {
            let setting = missing == roles.serve ? SettingsCatalog.serveRole.name : SettingsCatalog.workerRole.name
            Startup.fail("\(setting): the role \(missing) does not exist, but \(present[0]) does: create it as deploy/README.md says "
                         + "(\"The database\"), or set \(setting) to the role you made")
        }
        if roles.serve == roles.worker {
            try await RuntimeRole.grant(to: roles.serve, client: client, logger: logger)
            print("granted the serve and worker privileges to \(roles.serve)")
            Startup.warn("SIWA_SERVE_ROLE and SIWA_WORKER_ROLE name one role, \(roles.serve): serve and worker share its privileges")
        } else {
            for (process, role) in [(RuntimeProcess.serve, roles.serve), (.worker, roles.worker)] {
                try await RuntimeRole.grant(to: role, for: [process], client: client, logger: logger)
                print("granted the \(process.rawValue) privileges to \(role)")
            }
        }
        for role in Set([roles.serve, roles.worker]).sorted() {
            let problems = try await RuntimeRole.excessPrivileges(of: role, client: client, logger: logger)
            if !problems.isEmpty {
                Startup.warn("the runtime role \(role) \(problems.joined(separator: " and ")): it can alter the audit trail")
            }
        }
    }

    /// The one-role trial: no runtime role of either name exists.
    private func grantOneRole(owner: DatabaseConfiguration, roles: RuntimeRoles, runtime: DatabaseConfiguration?,
                              client: PostgresClient, logger: Logger) async throws {
        guard let runtime, runtime.username != owner.username else {
            Startup.warn("""
                siwa serve and siwa worker will connect as \(owner.username), the owner of the schema, \
                which can alter or truncate the audit trail. For production, create the roles \(roles.serve) and \
                \(roles.worker) (deploy/README.md, "The database"), give each unit its own SIWA_DATABASE_URL, \
                and give the owner's URL to siwa migrate.
                """)
            return
        }
        try await RuntimeRole.grant(to: runtime.username, client: client, logger: logger)
        print("granted the runtime privileges to \(runtime.username)")
        Startup.warn("""
            neither \(roles.serve) nor \(roles.worker) exists: siwa serve and siwa worker share \(runtime.username), \
            which may do both processes' work (a trial). For production, create both roles (deploy/README.md, \
            "The database") and run siwa migrate again.
            """)
        let problems = try await RuntimeRole.excessPrivileges(of: runtime.username, client: client, logger: logger)
        if !problems.isEmpty {
            Startup.warn("the runtime role \(runtime.username) \(problems.joined(separator: " and ")): it can alter the audit trail")
        }
    }
}
