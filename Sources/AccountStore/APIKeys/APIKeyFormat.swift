import Crypto
import Foundation

/// An API key as the app's backend sends it: `siwa_<prefix>_<secret>`.
///
/// The prefix (12 characters of lowercase base32, 60 random bits) finds the
/// row and may be shown (`siwa api-keys list`, logs); the secret (32 random
/// bytes, base64url without padding: 43 characters) is known only to its
/// holder, and siwa keeps only the SHA-256 of its text.
public struct APIKeyFormat: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let prefix: String
    let secret: String

    static let scheme = "siwa_"
    static let prefixLength = 12
    static let secretLength = 43
    static let prefixAlphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)
    static let base64URLAlphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    static let length = scheme.utf8.count + prefixLength + 1 + secretLength

    /// A new random key.
    static func generate() -> APIKeyFormat {
        var random = SystemRandomNumberGenerator()
        // 32 divides 2^64, so `% 32` picks each character with equal chance.
        let prefix = String(decoding: (0..<prefixLength).map { _ in prefixAlphabet[Int(random.next() % 32)] }, as: UTF8.self)
        let secret = Data((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &random) }).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return APIKeyFormat(prefix: prefix, secret: secret)
    }

    /// The parts of a well-formed key; nil for anything else (without
    /// looking further than its length when that is wrong).
    public init?(parsing key: String) {
        let bytes = Array(key.utf8)
        guard bytes.count == Self.length, bytes.starts(with: Self.scheme.utf8) else { return nil }
        let prefix = bytes[Self.scheme.utf8.count ..< Self.scheme.utf8.count + Self.prefixLength]
        let separator = Self.scheme.utf8.count + Self.prefixLength
        let secret = bytes[(separator + 1)...]
        guard prefix.allSatisfy(Self.prefixAlphabet.contains), bytes[separator] == UInt8(ascii: "_"),
              secret.allSatisfy(Self.base64URLAlphabet.contains) else { return nil }
        self.init(prefix: String(decoding: prefix, as: UTF8.self), secret: String(decoding: secret, as: UTF8.self))
    }

    private init(prefix: String, secret: String) {
        self.prefix = prefix
        self.secret = secret
    }

    /// Never the secret: a description ends up in logs.
    public var description: String { "siwa_\(prefix)_…" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["prefix": prefix]) }

    /// What the app's backend sends. Shown once, when created.
    var text: String { Self.scheme + prefix + "_" + secret }

    /// What `siwa.api_keys.secret_sha256` holds.
    var secretSHA256: Data { Data(SHA256.hash(data: Data(secret.utf8))) }

    /// Whether this key's secret hashes to `stored`, comparing every byte
    /// whatever the first difference (no early exit to time).
    func matches(storedSHA256 stored: Data) -> Bool {
        let presented = Array(secretSHA256)
        guard stored.count == presented.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(presented, stored) { difference |= a ^ b }
        return difference == 0
    }
}
