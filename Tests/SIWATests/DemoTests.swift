import AccountStore
import ChildProcesses
import Foundation
import PostgresNIO
import Testing

/// The demo is a development tool of its own (`siwa-demo`): the production
/// `siwa` has no demo and does not link the Apple simulator, and the demo
/// works only in a database it made.
@Suite("Demo")
struct DemoTests {
    static var demoBinary: String {
        get throws {
            let path = TestEnvironment.repositoryRoot.appendingPathComponent(".build/debug/siwa-demo").path
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw TestSetupError("\(path) is missing: run `swift build` first (make test does)")
            }
            return path
        }
    }

    @Test func theProductionBinaryHasNoDemoAndNoAppleSimulator() async throws {
        let help = try await runSIWA(["--help"])
        #expect(help.status == 0)
        #expect(!help.output.contains("\n  demo"), "\(help.output)")
        let demo = try await runSIWA(["demo"])
        #expect(demo.status != 0, "\(demo.output)")

        // No symbol of the AppleSimulator module (nor its test keys) is linked in.
        let binary = try Data(contentsOf: try TestEnvironment.siwaBinary, options: .mappedIfSafe)
        #expect(binary.range(of: Data("AppleSimulator".utf8)) == nil, "siwa links AppleSimulator")
        #expect(binary.range(of: Data("DownstreamStub".utf8)) == nil, "siwa links the downstream stand-in")
    }

    @Test func siwaDemoRefusesToStartWithoutItsOwnSetting() async throws {
        // A production SIWA_DATABASE_URL in the environment is not enough: the demo never uses it.
        let result = try await Self.runDemo([], environment: ["SIWA_DEMO_DATABASE_URL": "", "SIWA_DATABASE_URL": "postgres://siwa@127.0.0.1/siwa"])
        #expect(result.status == 2, "\(result.output)")
        #expect(result.output.hasPrefix("siwa-demo: SIWA_DEMO_DATABASE_URL: is required"), "\(result.output)")
        #expect(result.output.split(separator: "\n").count == 1, "\(result.output)")
    }

    /// End to end on the test cluster: migrate as the owner, serve as
    /// siwa_serve, the worker as siwa_worker and the plan's SQL as
    /// siwa_purge, in a database the demo made and then dropped.
    @Test func siwaDemoRunsInADatabaseOfItsOwnAndDropsIt() async throws {
        let server = try TestEnvironment.databaseURL
        let before = try await Self.databaseNames()
        let result = try await Self.runDemo([], environment: ["SIWA_DEMO_DATABASE_URL": server])
        #expect(result.status == 0, "\(result.output.suffix(3000))")
        let name = result.output.split(separator: "\n").first { $0.hasPrefix("Demo database: ") }
            .flatMap { $0.split(separator: " ").dropFirst(2).first }.map(String.init)
        #expect(name?.hasPrefix("siwa_demo_") == true, "\(result.output.prefix(500))")
        #expect(result.output.contains("granted the serve privileges to siwa_serve"), "\(result.output.prefix(3000))")
        #expect(result.output.contains("granted the worker privileges to siwa_worker"), "\(result.output.prefix(3000))")
        #expect(result.output.contains("GRANT SELECT, DELETE ON demo_app.profiles TO siwa_purge"), "\(result.output.prefix(3000))")
        #expect(result.output.contains("signature valid"))
        // The token lifecycle part: sign-in, lookup, in-app deletion, a web
        // sign-in, the revoke reaching the simulator, and the purge that followed.
        let lines = result.output.split(separator: "\n").map(String.init)
        let answers = lines.filter { $0.hasPrefix("  -> ") }
        #expect(answers.count >= 4, "\(result.output.suffix(3000))")
        if answers.count >= 4 {
            #expect(answers[0].hasPrefix("  -> 200 ") && answers[0].contains(#""refresh_token_stored":true"#), "\(answers[0])")
            #expect(answers[1].hasPrefix("  -> 200 ") && answers[1].contains(#""status":"active""#), "\(answers[1])")
            #expect(answers[2].hasPrefix("  -> 202 ") && answers[2].contains(#""deletion_scheduled""#), "\(answers[2])")
            // The web flow: the code alone, exchanged with its redirect URI.
            #expect(answers[3].hasPrefix("  -> 200 ") && answers[3].contains(#""refresh_token_stored":true"#), "\(answers[3])")
        }
        #expect(lines.contains { $0.hasPrefix("Apple simulator /auth/revoke received 1 token(s): ") && $0.hasSuffix("(now revoked)") },
                "\(result.output.suffix(3000))")
        #expect(!result.output.contains("INVALID"))
        #expect(result.output.contains("Dropped the demo database \(name ?? "?")."))
        let after = try await Self.databaseNames()
        #expect(after.subtracting(before).filter { $0.hasPrefix("siwa_demo_") }.isEmpty, "a demo database was left behind")
        if let name { #expect(!after.contains(name)) }
    }

    static func databaseNames() async throws -> Set<String> {
        let server = try DatabaseConfiguration(url: try TestEnvironment.databaseURL)
        return try await TestDatabase.withClient(server) { client in
            var names: Set<String> = []
            let rows = try await client.query("SELECT datname FROM pg_database", logger: TestEnvironment.logger)
            for try await name in rows.decode(String.self) { names.insert(name) }
            return names
        }
    }

    static func runDemo(_ arguments: [String], environment: [String: String]) async throws -> ProcessResult {
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        return try await runToCompletion(try demoBinary, arguments, environment: env)
    }
}
