import AccountStore
import AppleSimulator
import ChildProcesses
import Crypto
import Foundation
import Logging

/// What sign-in needs on disk: the team's `.p8` key (its public half is
/// registered with the simulator) and a token key ring, both mode 0600 in a
/// directory of their own; and an API key made in the test's database.
struct SignInFixture: Sendable {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"

    let directory: URL
    let privateKey: P256.Signing.PrivateKey
    let privateKeyFile: String
    let keyRingFile: String

    init(keyRing lines: [String]? = nil) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-signin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        privateKey = P256.Signing.PrivateKey()
        privateKeyFile = directory.appendingPathComponent("AuthKey_\(Self.keyID).p8").path
        keyRingFile = directory.appendingPathComponent("token-keys").path
        try Self.write(privateKey.pemRepresentation + "\n", to: privateKeyFile)
        try Self.write((lines ?? [TokenKeyRing.newKeyLine(id: "k1")]).joined(separator: "\n") + "\n", to: keyRingFile)
    }

    func settings(appleBaseURL: String) -> [String: String] {
        [
            "SIWA_APPLE_TEAM_ID": Self.teamID, "SIWA_APPLE_KEY_ID": Self.keyID,
            "SIWA_APPLE_PRIVATE_KEY_FILE": privateKeyFile, "SIWA_TOKEN_ENCRYPTION_KEYS_FILE": keyRingFile,
            "SIWA_APPLE_BASE_URL": appleBaseURL, "SIWA_APPLE_REQUEST_TIMEOUT_SECONDS": "2",
        ]
    }

    /// Replaces the key ring file's lines (rotation).
    func rewriteKeyRing(_ lines: [String]) throws {
        try Self.write(lines.joined(separator: "\n") + "\n", to: keyRingFile)
    }

    static func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
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
    let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-dump-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: outputFile) }
    let child = try ChildProcess(executable: bin + "/pg_dump", arguments: ["--dbname", database.ownerURL],
                                 environment: ["PGSSLMODE": "disable"], outputFile: outputFile)
    let status = await child.wait()
    let output = (try? String(contentsOfFile: outputFile, encoding: .utf8)) ?? ""
    guard status == 0 else { throw TestSetupError("pg_dump failed: \(output.prefix(300))") }
    return output
}
