import SIWAConfiguration
import AccountStore
import Foundation
import Logging
import PostgresNIO
import SIWAServer

/// siwa's exit statuses, one table for every command (`siwa --help`,
/// docs/cli.md). The units restart on 1 and never on 2 or 64
/// (RestartPreventExitStatus=), which no restart can fix.
enum ExitStatus {
    /// Something failed at run time that may pass (the database down, Apple
    /// unreachable, a check that found a fault): systemd may retry.
    static let runtimeFailure: Int32 = 1
    /// A missing or malformed setting, key file or purge plan, a refused
    /// TLS connection or password, a schema ahead of this binary or edited:
    /// fix it first. (A schema that is behind is waited for.)
    static let configuration: Int32 = 2
    /// The command line itself: an unknown subcommand, option or argument
    /// (swift-argument-parser's EX_USAGE).
    static let usage: Int32 = 64

    static let table = """
        Exit status (every command):
          0   done
          1   a runtime failure that may pass: the database or Apple unreachable,
              a check that found a fault
          2   configuration: a missing or malformed setting, key file or purge
              plan, a refused password or TLS certificate, a schema ahead of this
              siwa or edited (serve and worker wait for one that is behind)
          64  usage: an unknown subcommand, option or argument
        """
}

/// Start-up failures end the process with one clear line on stderr.
enum Startup {
    /// The settings from the environment, after every secret that cannot
    /// be used (given two ways, a file that cannot be read) stopped the
    /// command, all of them in one go.
    static func reader(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> SettingsReader {
        let reader = SettingsReader(environment)
        let problems = reader.problems.values.sorted { $0.name < $1.name }
        guard problems.isEmpty else {
            for problem in problems.dropLast() { report("\(problem)", priority: 3) }
            fail("\(problems[problems.count - 1])")
        }
        return reader
    }

    /// Reports each `SIWA_*` variable no command reads: a likely typo
    /// (`SIWA_HTTP_PROT` leaves the port at its default, silently otherwise).
    /// `also`: other names this command reads (the purge plan's).
    static func warnUnknownSettings(_ env: SettingsReader, also known: Set<String> = []) {
        for line in env.unknownNames(also: known) { warn(line) }
    }

    /// A warning on stderr that does not stop the command.
    static func warn(_ message: String) {
        report("warning: \(message)", priority: 4)
    }

    static func fail(_ message: String, code: Int32 = ExitStatus.configuration) -> Never {
        report(message, priority: 3)
        exit(code)
    }

    /// One line on stderr; under systemd (stderr is the journal's stream)
    /// with its syslog priority in front, as the log lines have, so that
    /// `journalctl -p warning` shows why a unit did not start: `<3>` (err)
    /// for a failure, `<4>` for a warning.
    static func report(_ message: String, priority: Int) {
        let prefix = journal ? "<\(priority)>" : ""
        FileHandle.standardError.write(Data("\(prefix)siwa: \(message)\n".utf8))
    }

    private static let journal = JournalStream.isConnected(STDERR_FILENO, environment: ProcessInfo.processInfo.environment)

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
