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

    /// A `.p8` is about 250 bytes; anything much larger is not one.
    static let maximumFileBytes = 64 * 1024

    /// Reads the `.p8` at `path`. Errors are one line naming the file and
    /// what is wrong with it; none quotes the file's content.
    public static func load(p8Path path: String, teamID: String, keyID: String) throws(AppleClientSecretError) -> AppleClientSecretKey {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw AppleClientSecretError("\(path): no such file (the Sign in with Apple key, AuthKey_\(keyID).p8)")
        }
        guard !isDirectory.boolValue else { throw AppleClientSecretError("\(path): is a directory, not a .p8 key file") }
        guard FileManager.default.isReadableFile(atPath: path), let data = FileManager.default.contents(atPath: path) else {
            throw AppleClientSecretError("\(path): cannot be read (check its owner and permissions)")
        }
        guard data.count <= maximumFileBytes else {
            throw AppleClientSecretError("\(path): \(data.count) bytes, too large to be a .p8 key")
        }
        guard let text = String(data: data, encoding: .utf8), let label = pemLabel(text) else {
            throw AppleClientSecretError("\(path): not a PEM file (no -----BEGIN ...----- / -----END ...----- lines)")
        }
        guard label == "PRIVATE KEY" || label == "EC PRIVATE KEY" else {
            throw AppleClientSecretError("\(path): holds a PEM \(label), not a PKCS#8 private key")
        }
        let key: P256.Signing.PrivateKey
        do { key = try P256.Signing.PrivateKey(pemRepresentation: text) } catch {
            // The error itself is not printed: it could echo key bytes.
            throw AppleClientSecretError("\(path): not a P-256 private key (Apple's .p8 keys are ES256, P-256)")
        }
        return AppleClientSecretKey(teamID: teamID, keyID: keyID, privateKey: key)
    }

    /// The label of the first `-----BEGIN <label>-----` line that has its
    /// matching END line, when the label is plain (capitals and spaces).
    static func pemLabel(_ text: String) -> String? {
        guard let begin = text.range(of: "-----BEGIN "),
              let close = text.range(of: "-----", range: begin.upperBound..<text.endIndex) else { return nil }
        let label = String(text[begin.upperBound..<close.lowerBound])
        guard !label.isEmpty, label.count <= 40, label.allSatisfy({ $0.isUppercase || $0 == " " || $0.isNumber }),
              text.contains("-----END \(label)-----") else { return nil }
        return label
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
