import AppleSimulator
import Foundation
import SIWAConfiguration
import Testing

/// siwa says which build it is, the same way everywhere: `siwa --version`,
/// `siwa_build_info` on /metrics, and CHANGELOG.md's newest entry all name
/// SIWAVersion's version (and the first two its commit).
@Suite("Version", .testDatabases, .timeLimit(.minutes(10)))
struct VersionTests {
    @Test func versionFlagPrintsTheVersionAndTheCommit() async throws {
        let result = try await runSIWA(["--version"])
        #expect(result.status == 0)
        #expect(result.output == "\(SIWAVersion.version) (commit \(SIWAVersion.commit))\n")
        // `make test` writes the commit it builds from into the build stamp's
        // header first (scripts/build-stamp.sh): the binary must say what the
        // header says now, so a header change that did not recompile the
        // stamp (an untracked dependency) fails here.
        if let stamped = try Self.stampedCommit() {
            #expect(SIWAVersion.commit == stamped, "the build stamp's header says \(stamped)")
        }
    }

    /// The commit in Sources/SIWABuildStamp/generated/commit.h, nil when
    /// there is none (a bare `swift test` in a fresh checkout).
    static func stampedCommit() throws -> String? {
        let header = TestEnvironment.repositoryRoot.appendingPathComponent("Sources/SIWABuildStamp/generated/commit.h")
        guard FileManager.default.fileExists(atPath: header.path) else { return nil }
        let text = try String(contentsOf: header, encoding: .utf8)
        let prefix = "#define SIWA_GIT_COMMIT \""
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }), line.hasSuffix("\"") else {
            Issue.record("\(header.path) has no SIWA_GIT_COMMIT line: \(text)")
            return nil
        }
        return String(line.dropFirst(prefix.count).dropLast())
    }

    /// A real `siwa serve`, scraped over HTTP as Prometheus does.
    @Test func serveMetricsCarryTheBuildInfo() async throws {
        let database = try await TestDatabase.create()
        let apple = try AppleSimulator()
        let appleServer = try await TestPorts.serve { try await apple.start(port: $0) }
        let siwa = try await SIWAProcess.serve(environment: [
            "SIWA_DATABASE_URL": database.serveURL, "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
            "SIWA_APPLE_JWKS_URL": appleServer.baseURL + "/auth/keys",
        ])
        try atTestEnd { await siwa.kill9(); await appleServer.stop() }
        let metrics = try await HTTPAnswer.send(method: .GET, url: "http://127.0.0.1:\(siwa.metricsPort)/metrics", body: nil, headers: [])
        #expect(metrics.status == 200)
        let lines = metrics.text.split(separator: "\n").filter { $0.hasPrefix("siwa_build_info{") }
        #expect(lines.count == 1, "\(metrics.text)")
        let line = String(lines.first ?? "")
        #expect(line.contains(#"version="\#(SIWAVersion.version)""#), "\(line)")
        #expect(line.contains(#"commit="\#(SIWAVersion.commit)""#), "\(line)")
        #expect(line.hasSuffix(" 1") || line.hasSuffix(" 1.0"), "\(line)")
    }

    @Test func changelogsNewestEntryIsThisVersion() throws {
        let changelog = try String(contentsOf: TestEnvironment.repositoryRoot.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        // "## Unreleased" on top gathers what is merged since; the release names it.
        let newest = changelog.split(separator: "\n").first { $0.hasPrefix("## ") && $0 != "## Unreleased" }
        #expect(newest?.hasPrefix("## \(SIWAVersion.version) ") == true, "\(newest ?? "no entry"): add one for \(SIWAVersion.version)")
    }
}
