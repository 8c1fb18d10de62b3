import AccountStore
import AppleSimulator
import Foundation
import Logging

/// Sign-in for the tests: the team key and key ring on disk
/// (`SimulatedTeamKeyFiles`), and an API key made in the test's database.
enum SignInFixture {
    /// A team key and a one-key ring; register it with the simulator
    /// (`ServerHarness.start(signIn:)` does).
    static func files(keyRing lines: [String]? = nil) throws -> SimulatedTeamKeyFiles {
        try SimulatedTeamKeyFiles(teamID: TestEnvironment.team, keyID: "KEY1234567",
                                  keyRing: lines ?? [TokenKeyRing.newKeyLine(id: "k1")], label: "signin")
    }

    /// The settings serve and worker get: sign-in on, Apple's deadline
    /// shorter than the default (the tests of a stalled Apple wait it out),
    /// yet one the simulator meets on a loaded machine: it answers from the
    /// test process, which runs the other suites' tests meanwhile (2 s was
    /// missed under a load of 12 on two cores).
    static func settings(_ files: SimulatedTeamKeyFiles, appleBaseURL: String) -> [String: String] {
        files.settings(appleBaseURL: appleBaseURL).merging(["SIWA_APPLE_REQUEST_TIMEOUT_SECONDS": "5"]) { $1 }
    }

    /// A live API key in `database`, made as the owner (as `siwa api-keys create` would as an admin).
    static func apiKey(in database: TestDatabase, name: String = "backend") async throws -> String {
        try await TestDatabase.withClient(database.configuration) { client in
            try await APIKeyAdministration(client: client, logger: TestEnvironment.logger).create(name: name, loginHint: "test").key
        }
    }
}

/// `pg_dump` of the whole database (data and schema), as an attacker with a
/// backup would read it.
func pgDump(_ database: TestDatabase) async throws -> String {
    // The newest installed PostgreSQL's (scripts/testdb.sh may have installed
    // the distribution's default version), unless SIWA_PG_BIN says otherwise.
    let installed = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
        .compactMap(Int.init).sorted().last.map { "/usr/lib/postgresql/\($0)/bin" }
    let bin = ProcessInfo.processInfo.environment["SIWA_PG_BIN"] ?? installed ?? "/usr/lib/postgresql/15/bin"
    let result = try await runToCompletion(bin + "/pg_dump", ["--dbname", database.ownerURL], environment: ["PGSSLMODE": "disable"])
    guard result.status == 0 else { throw TestSetupError("pg_dump failed: \(result.output.prefix(300))") }
    return result.output
}
