import AccountStore
import Foundation
import Logging
import PostgresNIO
import SIWAConfiguration

/// A short-lived database client for one command (`siwa api-keys`,
/// `siwa tokens rekey`), set up as `siwa jobs` does: settings checked, the
/// database reached first, and failures ending the command with one line.
enum CommandDatabase {
    /// `body` with a client on SIWA_DATABASE_URL. An error of type
    /// `Refusal` ends the command with its description (exit status 1);
    /// any other with the database's reason.
    static func run<T: Sendable, Refusal: Error & CustomStringConvertible>(
        label: String, refusing _: Refusal.Type,
        _ body: @escaping @Sendable (PostgresClient, Logger) async throws -> T
    ) async -> T {
        let env = Startup.reader()
        Startup.warnUnknownSettings(env)
        let log = Startup.settings { try LogSettings(environment: env) }
        LoggingSetup.bootstrap(log)
        let url = Startup.settings { try env.required(SettingsCatalog.databaseURL) }
        let database = Startup.settings { try DatabaseConfiguration(url: url, maximumConnections: 2) }
        await Startup.requireConnection(database)
        do {
            return try await database.withClient { client in
                try await body(client, Logger(label: label))
            }
        } catch let error as Refusal {
            Startup.fail(error.description, code: 1)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "42501" {
            Startup.fail("SIWA_DATABASE_URL: \(database.redactedDescription): permission denied: "
                + (error.serverInfo?[.message] ?? "") + " (see --help for the role to use)", code: 1)
        } catch {
            Startup.fail("SIWA_DATABASE_URL: \(database.redactedDescription): \(database.describe(connectionError: error))", code: 1)
        }
    }
}
