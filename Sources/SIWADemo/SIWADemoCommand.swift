import AccountStore
import ArgumentParser
import ChildProcesses
import Foundation
import Logging
import PostgresNIO
#if canImport(Glibc)
import Glibc
#endif

/// `siwa-demo`: a development tool, not part of the production binary.
/// It needs the Apple simulator, which `siwa` itself never links.
@main
struct SIWADemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "siwa-demo",
        abstract: "Show siwa working end to end against a simulated Apple, on this machine (development only).",
        discussion: """
            Makes a fresh database of its own, siwa_demo_<random>, on the PostgreSQL server of \
            SIWA_DEMO_DATABASE_URL, and works only in it; the database named in that URL is used \
            for nothing but CREATE DATABASE and DROP DATABASE. So the demo can never touch a \
            database it did not create. The demo database is dropped at the end (--keep keeps it; \
            an interrupted demo leaves it too: its name is the first line printed, and its \
            COMMENT says it is a siwa-demo scratch database).

            In the demo database it runs, as production does: `siwa migrate` as the owner (the \
            role of SIWA_DEMO_DATABASE_URL, which needs CREATEDB), then `siwa serve` as serve's \
            role (SIWA_DEMO_SERVE_USER, default siwa_serve) and `siwa worker` as the worker's \
            (SIWA_DEMO_WORKER_USER, default siwa_worker), each with the user name as password \
            unless SIWA_DEMO_SERVE_PASSWORD / SIWA_DEMO_WORKER_PASSWORD say otherwise. It starts \
            the Apple simulator, sends one notification of each type plus a duplicate and a \
            forged one, prints each answer and the resulting rows; then runs `siwa worker` with a \
            demo purge plan (delete rows from a demo app table granted to the purge role, \
            SIWA_DEMO_PURGE_ROLE, default siwa_purge; notify a stand-in downstream service with a \
            signed webhook) and prints the purges; then a sign-in, an in-app deletion and a web \
            sign-in; last, an app transfer of three users to another team (siwa transfer prepare, \
            the worker restarted with the receiving team's key, siwa transfer complete).

            `make demo` runs it on a throwaway PostgreSQL cluster (scripts/testdb.sh), which has \
            these roles. `siwa-demo simulator` runs the Apple simulator alone (its own --help).
            """,
        subcommands: [SimulatorCommand.self]
    )

    @Option(help: "Port for siwa serve's public listener (default: a free one).")
    var port: Int = 0

    @Option(help: "Port for siwa serve's API listener, /v1 (default: a free one).")
    var apiPort: Int = 0

    @Option(help: "The siwa executable to run (default: the one beside siwa-demo).")
    var siwa: String?

    @Option(help: "With --serve: turn the admin listener on at this port (0: a free one) and make an admin key.")
    var adminPort: Int?

    @Option(help: "With --serve: once all is ready, write the listeners' URLs and the keys to this file as NAME='VALUE' lines (make fuzz-api reads it).")
    var envFile: String?

    @Option(help: "With --serve: one more setting for siwa serve, NAME=VALUE (repeatable; make fuzz-api raises SIWA_ADMIN_AUTH_FAILURES_PER_MINUTE).")
    var serveSetting: [String] = []

    @Option(help: "With --serve: the worker delivers the app events here instead of to the example backend; the env file gets their secret as SIWA_APP_WEBHOOK_SECRET.")
    var appWebhookURL: String?

    @Flag(help: "Keep the demo database at the end (its name is printed) instead of dropping it.")
    var keep = false

    @Flag(help: "Instead of the scripted demo, leave siwa (sign-in on), its worker and the Apple simulator running, and print curl commands to try the API (`make try`); Ctrl-C ends it.")
    var serve = false

    func run() async throws {
        let env = ProcessInfo.processInfo.environment
        guard let serverURL = env["SIWA_DEMO_DATABASE_URL"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            DemoFailure.exit("""
                SIWA_DEMO_DATABASE_URL: is required: a PostgreSQL server and a role that may CREATE DATABASE \
                (e.g. postgres://siwa:siwa@127.0.0.1:25432/siwa; `make demo` sets it)
                """)
        }
        let server: DatabaseConfiguration
        do { server = try DatabaseConfiguration(url: serverURL, maximumConnections: 1) } catch {
            DemoFailure.exit("SIWA_DEMO_DATABASE_URL: \(error)")
        }
        func role(_ name: String, default fallback: String) -> String {
            let value = env[name].flatMap { $0.isEmpty ? nil : $0 } ?? fallback
            guard value.range(of: "^[a-z_][a-z0-9_]{0,62}$", options: .regularExpression) != nil else {
                DemoFailure.exit("\(name): expected a plain role name (a-z, 0-9, _), got '\(value.prefix(64))'")
            }
            return value
        }
        let roles = DemoRoles(serve: role("SIWA_DEMO_SERVE_USER", default: "siwa_serve"),
                              worker: role("SIWA_DEMO_WORKER_USER", default: "siwa_worker"),
                              purge: role("SIWA_DEMO_PURGE_ROLE", default: "siwa_purge"))
        let passwords = (serve: env["SIWA_DEMO_SERVE_PASSWORD"].flatMap { $0.isEmpty ? nil : $0 } ?? roles.serve,
                         worker: env["SIWA_DEMO_WORKER_PASSWORD"].flatMap { $0.isEmpty ? nil : $0 } ?? roles.worker)
        let siwa = try siwaExecutable()

        let name = "siwa_demo_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
        let scratch = try await DemoDatabase.create(name: name, on: server, serverURL: serverURL, roles: roles, passwords: passwords)
        print("Demo database: \(name) on \(server.host):\(server.port) (made for this run; owner \(server.username), "
              + "serve as \(roles.serve), worker as \(roles.worker))")
        var failure: (any Error)?
        do {
            let demo = Demo(siwa: siwa, database: scratch, port: port, apiPort: apiPort)
            if serve {
                try await DemoServe(demo: demo, adminPort: adminPort, envFile: envFile, serveSettings: serveSettings(),
                              appWebhookURL: appWebhookURL).run()
            } else {
                try await demo.run()
            }
        } catch {
            failure = error
        }
        if keep {
            print("\nKept the demo database \(name) (drop it with: DROP DATABASE \(name);)")
        } else {
            do {
                try await scratch.drop(on: server)
                print("\nDropped the demo database \(name).")
            } catch {
                FileHandle.standardError.write(Data("siwa-demo: could not drop \(name): \(server.describe(connectionError: error))\n".utf8))
            }
        }
        if let failure {
            if let exit = failure as? ExitCode { throw exit }
            DemoFailure.exit("\(failure)", code: 1)
        }
    }

    /// `--serve-setting NAME=VALUE`s: siwa's settings only (SIWA_*).
    func serveSettings() -> [String: String] {
        var settings: [String: String] = [:]
        for text in serveSetting {
            guard let equals = text.firstIndex(of: "="), text.hasPrefix("SIWA_") else {
                DemoFailure.exit("--serve-setting: expected SIWA_NAME=VALUE, got '\(text.prefix(64))'")
            }
            settings[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        return settings
    }

    /// The `siwa` binary beside this one (both come out of `swift build`).
    func siwaExecutable() throws -> String {
        if let siwa { return siwa }
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let sibling = URL(fileURLWithPath: me).standardizedFileURL.deletingLastPathComponent().appendingPathComponent("siwa").path
        guard FileManager.default.isExecutableFile(atPath: sibling) else {
            DemoFailure.exit("no siwa executable at \(sibling): run `swift build` first, or pass --siwa PATH")
        }
        return sibling
    }
}

enum DemoFailure {
    static func exit(_ message: String, code: Int32 = 2) -> Never {
        FileHandle.standardError.write(Data("siwa-demo: \(message)\n".utf8))
        Foundation.exit(code)
    }
}

/// The roles serve, worker and the purge plan's SQL run as (plain identifiers: checked at start).
struct DemoRoles: Sendable {
    let serve: String
    let worker: String
    let purge: String
}

/// The demo's own database: created for this run, so nothing the demo does
/// can reach a database it did not make.
struct DemoDatabase: Sendable {
    let name: String
    /// The owner's URL of the demo database (SIWA_MIGRATE_DATABASE_URL).
    let ownerURL: String
    /// serve's role's URL of the demo database (serve's SIWA_DATABASE_URL).
    let serveURL: String
    /// The worker's role's URL (the worker's SIWA_DATABASE_URL).
    let workerURL: String
    let roles: DemoRoles
    let owner: DatabaseConfiguration

    static func create(name: String, on server: DatabaseConfiguration, serverURL: String,
                       roles: DemoRoles, passwords: (serve: String, worker: String)) async throws -> DemoDatabase {
        let logger = Logger(label: "siwa-demo", factory: { _ in SwiftLogNoOpLogHandler() })
        do {
            try await server.withClient { client in
                try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: logger)
                try await client.query(PostgresQuery(unsafeSQL: """
                    COMMENT ON DATABASE \(name) IS 'siwa-demo scratch database; dropped when the demo ends'
                    """), logger: logger)
            }
        } catch {
            DemoFailure.exit("SIWA_DEMO_DATABASE_URL: cannot create the demo database \(name) as \(server.username) "
                             + "(the role needs CREATEDB): \(server.describe(connectionError: error))")
        }
        guard var components = URLComponents(string: serverURL) else { DemoFailure.exit("SIWA_DEMO_DATABASE_URL: not a URL") }
        components.path = "/\(name)"
        let ownerURL = components.string ?? serverURL
        func url(user: String, password: String) -> String {
            var roleComponents = components
            roleComponents.user = user
            roleComponents.password = password
            return roleComponents.string ?? serverURL
        }
        return DemoDatabase(name: name, ownerURL: ownerURL, serveURL: url(user: roles.serve, password: passwords.serve),
                            workerURL: url(user: roles.worker, password: passwords.worker), roles: roles,
                            owner: server.with(database: name))
    }

    /// Drops the database once the demo's processes have left it. A
    /// process that exited leaves its server session behind for a moment
    /// (longer on a loaded machine), and FORCE may not end another role's
    /// sessions as the owner: so wait for them, up to 10 s, then drop.
    func drop(on server: DatabaseConfiguration) async throws {
        let logger = Logger(label: "siwa-demo", factory: { _ in SwiftLogNoOpLogHandler() })
        try await server.withClient { client in
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                let rows = try await client.query("""
                    SELECT count(*) FROM pg_stat_activity WHERE datname = \(name) AND pid <> pg_backend_pid()
                    """, logger: logger)
                var sessions = 0
                for try await count in rows.decode(Int.self) { sessions = count }
                if sessions == 0 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            _ = try await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"), logger: logger)
        }
    }
}
