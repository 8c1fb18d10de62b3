import AccountLifecycle
import AccountStore
import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import SIWAConfiguration
import SIWAServer
import SIWAWorker

/// `siwa check [serve|worker]`: every problem of a process's configuration
/// in one run, where start-up stops at the first. The units run it as
/// ExecStartPre=, so a unit that cannot start says all of why in the journal.
struct Check: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the settings, key files, purge plan, database and schema of serve or the worker, and report every problem at once.",
        discussion: """
            Reads every setting the process reads, as start-up does, and reports every problem \
            in one run, one line each on stderr (`siwa: NAME: problem`), in this order: SIWA_* \
            names no command reads (with the likely intended name), secrets that cannot be \
            read (NAME and NAME_FILE both set, a file or credential that cannot be read), \
            each setting's own value, what depends on several settings, the key files \
            (the Sign in with Apple key, the token key ring, the receipt key and the \
            receipts' public key set), the purge plan (worker), then the database: a \
            connection as SIWA_DATABASE_URL and the schema's version. Without an argument it \
            checks both processes' settings in this one environment.
            The units run it as ExecStartPre=, so a unit that cannot start shows every reason \
            in `journalctl -u siwa-serve -p warning`.

            Exit status: 0 nothing wrong (one line per check on stdout), 2 any problem. A \
            database that cannot be reached is a warning, said in plain words (host, port, what \
            failed), and the schema is then not checked: it may not be up yet, and serve and \
            the worker wait for it. A database that answers and refuses (a password, a database \
            that does not exist, TLS) is a problem.
            """
    )

    enum Process: String, ExpressibleByArgument, CaseIterable {
        case serve, worker
    }

    @Argument(help: "serve or worker (both when not given).")
    var process: Process?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let reader = SettingsReader(environment)
        let processes = process.map { [$0] } ?? Process.allCases
        var report = CheckReport()

        // Read first, reported after the unknown names: the plan names variables of its own.
        var plan: PurgePlan?
        var serveSettings: ServerSettings?
        var workerSettings: WorkerSettings?
        var settingProblems: [SettingError] = reader.problems.values.sorted { $0.name < $1.name }
        let readers: Set<Setting.Reader> = Set(processes.map { $0 == .serve ? .serve : .worker })
        for setting in SettingsCatalog.all where !setting.readers.isDisjoint(with: readers) {
            if reader.problems[setting.name] == nil, let problem = reader.problem(setting) { settingProblems.append(problem) }
        }
        var later: [String] = []
        if processes.contains(.serve) {
            serveSettings = try? ServerSettings(environment: reader)
            later += ServerSettings.problems(reader).map(Self.describe)
            if let signIn = serveSettings?.signIn { later += await Self.checkKeys(signIn) }
        }
        if processes.contains(.worker) {
            workerSettings = try? WorkerSettings(environment: reader)
            later += WorkerSettings.problems(reader).map(Self.describe)
            if let settings = workerSettings {
                if let signIn = settings.signIn, serveSettings?.signIn == nil { later += await Self.checkKeys(signIn) }
                do { _ = try settings.receipts?.signer() } catch { later.append(Self.describe(error)) }
                do { plan = try WorkerAssembly.loadPlan(settings: settings, environment: environment) } catch {
                    later.append(Self.describe(error))
                }
            } else if let path = reader.string(SettingsCatalog.purgePlan) {
                do { plan = try PurgePlan.load(path: path, environment: environment) } catch {
                    later.append("SIWA_PURGE_PLAN: \(path): \(error)")
                }
            }
        }

        for line in reader.unknownNames(also: plan?.environmentNames ?? []) { report.configuration(line) }
        for problem in settingProblems { report.configuration("\(problem)") }
        // A typed reader's first error repeats a setting already reported: only new ones.
        for line in later where !report.mentions(line) { report.configuration(line) }
        if let plan { report.passed("purge plan: \(WorkerAssembly.describe(plan))") }

        let url = serveSettings?.database.url ?? workerSettings?.database.url ?? reader.string(SettingsCatalog.databaseURL)
        if let url, let database = try? DatabaseConfiguration(url: url, maximumConnections: 2) {
            await Self.checkDatabase(database, purgeRole: plan?.hasOwnDatabaseSQL == true ? workerSettings?.purge.role : nil,
                                     report: &report)
        } else {
            report.configuration("SIWA_DATABASE_URL: not checked (no usable URL)", ifNothingSaid: "SIWA_DATABASE_URL")
        }
        report.finish(processes.map(\.rawValue).joined(separator: " and "))
    }

    /// The Sign in with Apple key and the token key ring, loaded as start-up loads them.
    static func checkKeys(_ signIn: SignInSettings) async -> [String] {
        do {
            let access = try AppleAccess(signIn)
            try? await access.httpClient.shutdown()
            return []
        } catch {
            return [describe(error)]
        }
    }

    /// One connection as SIWA_DATABASE_URL, then the schema's version (and
    /// the purge role, for a plan with SQL on siwa's database).
    static func checkDatabase(_ database: DatabaseConfiguration, purgeRole: String?, report: inout CheckReport) async {
        let setting = "SIWA_DATABASE_URL: \(database.redactedDescription)"
        let logger = Logger(label: "siwa.check", factory: { _ in SwiftLogNoOpLogHandler() })
        do {
            try await database.probe(logger: logger)
        } catch {
            let line = "\(setting): \(database.describe(connectionError: error))"
            // Reachable but refused (a password, a database that does not
            // exist, TLS) is configuration; unreachable may pass.
            if DatabaseConfiguration.isTLSFailure(error) || (error as? PSQLError)?.code == .server {
                report.configuration(line)
            } else {
                report.warning(line + " (not a configuration problem by itself; the schema was not checked)")
            }
            return
        }
        report.passed("database: \(database.redactedDescription) answered (\(database.tlsDescription))")
        do {
            let migrator = try Migrator(directory: Migrator.defaultDirectory())
            let (problems, behind): ([String], [String]) = try await database.withClient { client in
                var problems: [String] = []
                var behind: [String] = []
                do { try await migrator.checkUpToDate(client: client, logger: logger) } catch MigrationError.pending(let names) {
                    behind = names
                } catch let error as MigrationError {
                    problems.append("\(error)")
                }
                if let purgeRole {
                    do { try await WorkerAssembly.checkPurgeRole(purgeRole, client: client, logger: logger) } catch let error as SettingError {
                        problems.append("\(error)")
                    }
                }
                return (problems, behind)
            }
            for problem in problems { report.configuration(problem) }
            // Not a configuration problem: serve and the worker wait for it.
            if !behind.isEmpty {
                report.warning("\(MigrationError.pending(behind)): serve and the worker wait until it is applied")
            } else if problems.isEmpty {
                report.passed("schema: up to date (\(migrator.migrations.count) migrations)")
            }
        } catch let error as MigrationError {
            report.configuration("\(error)")
        } catch {
            report.warning("\(setting): \(database.describe(connectionError: error)) (the schema was not checked)")
        }
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as DatabaseConfigurationError: "SIWA_DATABASE_URL: \(error)"
        default: "\(error)"
        }
    }
}

/// What `siwa check` found, in the order it found it.
struct CheckReport {
    private(set) var configurationProblems: [String] = []
    private(set) var warnings: [String] = []
    private(set) var passes: [String] = []

    mutating func configuration(_ line: String, ifNothingSaid name: String? = nil) {
        if let name, mentions(name + ":") { return }
        if !configurationProblems.contains(line) { configurationProblems.append(line) }
    }

    mutating func warning(_ line: String) { warnings.append(line) }
    mutating func passed(_ line: String) { passes.append(line) }

    /// Whether a line already reported names the same setting as `line`.
    func mentions(_ line: String) -> Bool {
        guard let name = line.split(separator: ":").first.map(String.init), name.hasPrefix("SIWA_") else {
            return configurationProblems.contains(line)
        }
        return configurationProblems.contains { $0.hasPrefix(name + ":") || $0.hasPrefix(name + " ") }
    }

    func finish(_ what: String) -> Never {
        for line in configurationProblems { Startup.report(line, priority: 3) }
        for line in warnings { Startup.report("warning: \(line)", priority: 4) }
        if configurationProblems.isEmpty {
            if !passes.isEmpty { print(passes.map { "ok: \($0)" }.joined(separator: "\n")) }
            print("siwa check \(what): no problem found" + (warnings.isEmpty ? "" : " (\(warnings.count) warning\(warnings.count == 1 ? "" : "s"))"))
            Foundation.exit(0)
        }
        let count = configurationProblems.count
        Startup.report("check \(what): \(count) problem\(count == 1 ? "" : "s")", priority: 3)
        Foundation.exit(ExitStatus.configuration)
    }
}
