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
            Needs SIWA_DATABASE_URL. SIWA_MIGRATIONS_DIR overrides where the files are.
            """
    )

    @Option(help: "Directory of the numbered SQL files (default: SIWA_MIGRATIONS_DIR, the installed share/siwa/sql, or the source tree's sql/).")
    var dir: String?

    @Flag(help: "Only report whether the database is up to date (exit 1 if not).")
    var check = false

    func run() async throws {
        let env = Environment()
        let log = Startup.settings { try LogSettings(environment: env) }
        LoggingSetup.bootstrap(log)
        let logger = Logger(label: "siwa.migrate")
        let url = Startup.settings { try env.required("SIWA_DATABASE_URL", example: "postgres://siwa:secret@127.0.0.1:5432/siwa") }
        let database = Startup.settings { try DatabaseConfiguration(url: url, maximumConnections: 2) }
        let directory = dir.map { URL(fileURLWithPath: $0) } ?? Migrator.defaultDirectory()
        let migrator = Startup.settings { try Migrator(directory: directory) }
        try await database.withClient { client in
            do {
                if check {
                    try await migrator.checkUpToDate(client: client, logger: logger)
                    print("up to date (\(migrator.migrations.count) migrations)")
                } else {
                    let applied = try await migrator.migrate(client: client, logger: logger)
                    print(applied.isEmpty ? "nothing to apply" : "applied: \(applied.joined(separator: ", "))")
                }
            } catch let error as MigrationError {
                Startup.fail("\(error)", code: 1)
            } catch let error as PSQLError {
                Startup.fail("database \(database.redactedDescription): \(error.serverInfo?[.message] ?? "\(error.code)")", code: 1)
            }
        }
    }
}
