import SIWAConfiguration
import AccountStore
import Foundation
import Logging
import PostgresNIO
import SIWAServer

/// Start-up failures end the process with one clear line on stderr.
enum Startup {
    /// Reports each `SIWA_*` variable no command reads: a likely typo
    /// (`SIWA_HTTP_PROT` leaves the port at its default, silently otherwise).
    /// `also`: other names this command reads (the purge plan's).
    static func warnUnknownSettings(_ env: SettingsReader, also known: Set<String> = []) {
        for line in env.unknownNames(also: known) { warn(line) }
    }

    /// A warning on stderr that does not stop the command.
    static func warn(_ message: String) {
        FileHandle.standardError.write(Data("siwa: warning: \(message)\n".utf8))
    }

    static func fail(_ message: String, code: Int32 = 2) -> Never {
        FileHandle.standardError.write(Data("siwa: \(message)\n".utf8))
        exit(code)
    }

    /// - Parameter databaseSetting: the setting a `DatabaseConfigurationError` is about.
    static func settings<T>(_ databaseSetting: String = "SIWA_DATABASE_URL", _ make: () throws -> T) -> T {
        do { return try make() } catch let error as SettingError {
            fail("\(error)")
        } catch let error as DatabaseConfigurationError {
            fail("\(databaseSetting): \(error)")
        } catch {
            fail("\(error)")
        }
    }

    /// The database could not be reached or refused us at start-up: one
    /// line naming the setting, with TLS refusals spelled out. Exit status
    /// 1 (not 2): the database may come back, so systemd may retry.
    static func databaseFailure(_ error: PSQLError, url: String, setting: String = "SIWA_DATABASE_URL") -> Never {
        guard let configuration = try? DatabaseConfiguration(url: url) else { fail("\(setting): \(error.code)", code: 1) }
        fail("\(setting): \(configuration.redactedDescription): \(configuration.describe(connectionError: error))", code: 1)
    }

    /// serve and worker at start: one connection, so that TLS refusing to
    /// connect (no TLS on the server under require/verify-*, a certificate
    /// that does not check out) stops start-up with one line naming the
    /// setting (exit status 2: a setting to fix). Anything else, such as a
    /// database that is not up yet, is left to the pool, which retries.
    static func checkTLS(_ configuration: DatabaseConfiguration, setting: String = "SIWA_DATABASE_URL") async {
        do {
            try await configuration.probe(logger: Logger(label: "siwa.probe", factory: { _ in SwiftLogNoOpLogHandler() }))
        } catch where DatabaseConfiguration.isTLSFailure(error) {
            fail("\(setting): \(configuration.redactedDescription): \(configuration.describe(connectionError: error))")
        } catch {
            return
        }
    }

    /// One-shot commands (migrate, jobs): the database must answer now, or
    /// the command stops with one line saying why (exit status 1).
    static func requireConnection(_ configuration: DatabaseConfiguration, setting: String = "SIWA_DATABASE_URL") async {
        do {
            try await configuration.probe(logger: Logger(label: "siwa.probe", factory: { _ in SwiftLogNoOpLogHandler() }))
        } catch {
            fail("\(setting): \(configuration.redactedDescription): \(configuration.describe(connectionError: error))", code: 1)
        }
    }
}
