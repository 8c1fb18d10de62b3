import AccountStore
import AppleSimulator
import Crypto
import Foundation
import Logging
import PostgresNIO

/// What sign-in needs, made for one run: the team's `.p8` key (its public
/// half registered with the simulator) and a token key ring, mode 0600 in a
/// directory of their own; and an API key for `/v1`.
struct SignInCredentials {
    static let teamID = "BENCH12345"
    static let keyID = "BENCHKEY01"

    let directory: URL
    let privateKeyFile: String
    let keyRingFile: String

    init(registeringWith apple: AppleSimulator) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-bench-signin-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let key = P256.Signing.PrivateKey()
        privateKeyFile = directory.appendingPathComponent("AuthKey_\(Self.keyID).p8").path
        keyRingFile = directory.appendingPathComponent("token-keys").path
        try Self.write(key.pemRepresentation + "\n", to: privateKeyFile)
        try Self.write(TokenKeyRing.newKeyLine(id: "bench1") + "\n", to: keyRingFile)
        apple.registerClient(teamID: Self.teamID, keyID: Self.keyID, publicKey: key.publicKey)
    }

    /// The settings serve and worker get to turn sign-in on.
    func settings(appleBaseURL: String) -> [String: String] {
        [
            "SIWA_APPLE_TEAM_ID": Self.teamID, "SIWA_APPLE_KEY_ID": Self.keyID,
            "SIWA_APPLE_PRIVATE_KEY_FILE": privateKeyFile, "SIWA_TOKEN_ENCRYPTION_KEYS_FILE": keyRingFile,
            "SIWA_APPLE_BASE_URL": appleBaseURL,
        ]
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    /// A live API key, made as the database owner (as `siwa api-keys create`).
    static func apiKey(_ client: PostgresClient, logger: Logger) async throws -> String {
        try await APIKeyAdministration(client: client, logger: logger).create(name: "bench", loginHint: "siwa-bench").key
    }

    private static func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
    }
}
