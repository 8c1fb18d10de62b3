import Crypto
import Foundation

/// The Sign in with Apple private key (`AuthKey_<KEYID>.p8`, PKCS#8 PEM,
/// P-256) with the ids Apple's client secret names: the team that owns it
/// and its key id. Printing it shows the ids, never the key.
public struct AppleClientSecretKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let teamID: String
    public let keyID: String
    let privateKey: P256.Signing.PrivateKey

    public init(teamID: String, keyID: String, privateKey: P256.Signing.PrivateKey) {
        self.teamID = teamID
        self.keyID = keyID
        self.privateKey = privateKey
    }

    /// Reads the `.p8` at `path`. Errors are one line naming the file and
    /// what is wrong with it; none quotes the file's content.
    public static func load(p8Path path: String, teamID: String, keyID: String) throws(AppleClientSecretError) -> AppleClientSecretKey {
        let naming = P256KeyFile.Naming(kind: "a .p8 key", missingHint: "the Sign in with Apple key, AuthKey_\(keyID).p8",
                                        curveHint: " (Apple's .p8 keys are ES256, P-256)")
        do {
            return AppleClientSecretKey(teamID: teamID, keyID: keyID, privateKey: try P256KeyFile.load(path: path, naming: naming))
        } catch {
            throw AppleClientSecretError("\(error)")
        }
    }

    public var description: String { "AppleClientSecretKey(team: \(teamID), key: \(keyID))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["teamID": teamID, "keyID": keyID]) }
}

/// Why a client secret could not be made: one line, naming the file or
/// setting and what is wrong; never key material.
public struct AppleClientSecretError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
