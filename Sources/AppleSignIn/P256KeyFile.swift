import Crypto
import Foundation

/// A P-256 private key in a PKCS#8 PEM file: Apple's `.p8` (the client
/// secret's key) and siwa's deletion-receipt key are both read here, with
/// the same checks and one-line errors that name the file and what is wrong
/// with it, and never quote its content.
public enum P256KeyFile {
    /// How the errors name the key.
    public struct Naming: Sendable {
        /// "a .p8 key": "is a directory, not a .p8 key file", "too large to be a .p8 key".
        public var kind: String
        /// After "no such file": what the file should have been.
        public var missingHint: String
        /// After "not a P-256 private key", if anything.
        public var curveHint: String

        public init(kind: String, missingHint: String, curveHint: String = "") {
            self.kind = kind
            self.missingHint = missingHint
            self.curveHint = curveHint
        }
    }

    /// A PEM key is about 250 bytes; anything much larger is not one.
    static let maximumFileBytes = 64 * 1024

    public static func load(path: String, naming: Naming) throws(P256KeyFileError) -> P256.Signing.PrivateKey {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw P256KeyFileError("\(path): no such file (\(naming.missingHint))")
        }
        guard !isDirectory.boolValue else { throw P256KeyFileError("\(path): is a directory, not \(naming.kind) file") }
        guard FileManager.default.isReadableFile(atPath: path), let data = FileManager.default.contents(atPath: path) else {
            throw P256KeyFileError("\(path): cannot be read (check its owner and permissions)")
        }
        guard data.count <= maximumFileBytes else {
            throw P256KeyFileError("\(path): \(data.count) bytes, too large to be \(naming.kind)")
        }
        guard let text = String(data: data, encoding: .utf8), let label = pemLabel(text) else {
            throw P256KeyFileError("\(path): not a PEM file (no -----BEGIN ...----- / -----END ...----- lines)")
        }
        guard label == "PRIVATE KEY" || label == "EC PRIVATE KEY" else {
            throw P256KeyFileError("\(path): holds a PEM \(label), not a PKCS#8 private key")
        }
        do { return try P256.Signing.PrivateKey(pemRepresentation: text) } catch {
            // The error itself is not printed: it could echo key bytes.
            throw P256KeyFileError("\(path): not a P-256 private key\(naming.curveHint)")
        }
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
}

/// Why a key file cannot be used: one line naming the file; never key material.
public struct P256KeyFileError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
