import Crypto
import Foundation

/// What turning sign-in on needs on disk, for the tests, `siwa-demo` and
/// `siwa-bench`: a team's Sign in with Apple key (`.p8`, a fresh P-256 key)
/// and a token key ring, mode 0600 in a directory of their own. The key ring
/// lines come from the caller (`TokenKeyRing.newKeyLine`): the simulator
/// knows nothing of siwa's formats.
public struct SimulatedTeamKeyFiles: Sendable {
    public let teamID: String
    public let keyID: String
    public let privateKey: P256.Signing.PrivateKey
    public let directory: URL
    public let privateKeyFile: String
    public let keyRingFile: String

    /// - Parameter label: names the directory (`siwa-<label>-<uuid>` under the temporary directory).
    public init(teamID: String, keyID: String, keyRing lines: [String], label: String) throws {
        self.teamID = teamID
        self.keyID = keyID
        privateKey = P256.Signing.PrivateKey()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        privateKeyFile = directory.appendingPathComponent("AuthKey_\(keyID).p8").path
        keyRingFile = directory.appendingPathComponent("token-keys").path
        try Self.write(privateKey.pemRepresentation + "\n", to: privateKeyFile)
        try rewriteKeyRing(lines)
    }

    /// The simulator accepts client secrets signed with this key.
    public func register(with apple: AppleSimulator) {
        apple.registerClient(teamID: teamID, keyID: keyID, publicKey: privateKey.publicKey)
    }

    /// The settings that turn sign-in on against the simulator at `appleBaseURL`.
    public func settings(appleBaseURL: String) -> [String: String] {
        [
            "SIWA_APPLE_TEAM_ID": teamID, "SIWA_APPLE_KEY_ID": keyID,
            "SIWA_APPLE_PRIVATE_KEY_FILE": privateKeyFile, "SIWA_TOKEN_ENCRYPTION_KEYS_FILE": keyRingFile,
            "SIWA_APPLE_BASE_URL": appleBaseURL,
        ]
    }

    /// Replaces the key ring file's lines (rotation, a lost key).
    public func rewriteKeyRing(_ lines: [String]) throws {
        try Self.write(lines.joined(separator: "\n") + "\n", to: keyRingFile)
    }

    public func remove() { try? FileManager.default.removeItem(at: directory) }

    private static func write(_ text: String, to path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
    }
}
