import Crypto
import Foundation

/// A JSON Web Key Set of P-256 public keys (RFC 7517, 7518 §6.2), as siwa
/// publishes the keys of its deletion receipts: each key `{"kty":"EC",
/// "crv":"P-256","x","y","kid","alg":"ES256","use":"sig"}`, its `kid` the
/// RFC 7638 thumbprint of the key, so a key names itself and two files
/// that hold the same key agree on its name.
public struct ES256KeySet: Sendable {
    public struct Entry: Sendable {
        public let keyID: String
        public let key: P256.Signing.PublicKey
    }

    /// In the order given, each `kid` once.
    public let entries: [Entry]

    public init(_ keys: [P256.Signing.PublicKey]) {
        self.init(entries: keys.map { Entry(keyID: Self.thumbprint($0), key: $0) })
    }

    private init(entries: [Entry]) {
        var seen = Set<String>()
        self.entries = entries.filter { seen.insert($0.keyID).inserted }
    }

    /// The keys by `kid`, for `ES256JWS.verify`.
    public var byKeyID: [String: P256.Signing.PublicKey] {
        Dictionary(entries.map { ($0.keyID, $0.key) }, uniquingKeysWith: { first, _ in first })
    }

    /// These keys, then those of `other` not among them.
    public func adding(_ other: ES256KeySet) -> ES256KeySet { ES256KeySet(entries: entries + other.entries) }

    /// RFC 7638: SHA-256 over `{"crv","kty","x","y"}` (members in that
    /// order, no spaces), base64url.
    public static func thumbprint(_ key: P256.Signing.PublicKey) -> String {
        let (x, y) = coordinates(key)
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(x)","y":"\#(y)"}"#
        return Base64URL.encode(Data(SHA256.hash(data: Data(canonical.utf8))))
    }

    private static func coordinates(_ key: P256.Signing.PublicKey) -> (x: String, y: String) {
        let raw = key.rawRepresentation
        return (Base64URL.encode(raw.prefix(32)), Base64URL.encode(raw.suffix(32)))
    }

    private struct JWK: Codable {
        var kty: String?
        var crv: String?
        var x: String?
        var y: String?
        var kid: String?
        var alg: String?
        var use: String?
    }

    private struct Document: Codable {
        var keys: [JWK]
    }

    /// `{"keys":[...]}`, members sorted; `pretty` for people, compact for HTTP.
    public func json(pretty: Bool = false) -> Data {
        let keys = entries.map { entry in
            let (x, y) = Self.coordinates(entry.key)
            return JWK(kty: "EC", crv: "P-256", x: x, y: y, kid: entry.keyID, alg: "ES256", use: "sig")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        // Plain strings only: encoding cannot fail.
        return (try? encoder.encode(Document(keys: keys))) ?? Data(#"{"keys":[]}"#.utf8)
    }

    /// A key set as `json()` writes it (or as any JWKS holds P-256 keys: a
    /// key without `kid` is named by its thumbprint). Anything else in it
    /// (another key type, `alg` or `use`) is refused, not skipped: a set
    /// that verifies receipts should hold nothing but their keys.
    public init(jwks data: Data) throws(ES256KeySetError) {
        let document: Document
        do { document = try JSONDecoder().decode(Document.self, from: data) } catch {
            throw ES256KeySetError("not a JSON key set ({\"keys\": [...]})")
        }
        guard !document.keys.isEmpty else { throw ES256KeySetError("the key set has no keys") }
        var entries: [Entry] = []
        for (index, jwk) in document.keys.enumerated() {
            let position = "key #\(index + 1)"
            guard jwk.kty == "EC", jwk.crv == "P-256" else { throw ES256KeySetError("\(position) is not an EC P-256 key") }
            guard jwk.alg == nil || jwk.alg == "ES256" else { throw ES256KeySetError("\(position): alg is not ES256") }
            guard jwk.use == nil || jwk.use == "sig" else { throw ES256KeySetError("\(position): use is not sig") }
            guard let x = jwk.x.flatMap({ Base64URL.decode($0) }), let y = jwk.y.flatMap({ Base64URL.decode($0) }), x.count == 32, y.count == 32,
                  let key = try? P256.Signing.PublicKey(rawRepresentation: x + y) else {
                throw ES256KeySetError("\(position): x and y are not a point of P-256 (32 bytes each, base64url)")
            }
            let keyID = jwk.kid ?? Self.thumbprint(key)
            guard !keyID.isEmpty, keyID.count <= 128 else { throw ES256KeySetError("\(position): kid is empty or too long") }
            entries.append(Entry(keyID: keyID, key: key))
        }
        self.init(entries: entries)
    }
}

extension ES256KeySet {
    /// A key set file is a few hundred bytes a key.
    static let maximumFileBytes = 1024 * 1024

    /// The key set in the file at `path`; errors are one line starting with the path.
    public static func load(path: String) throws(ES256KeySetError) -> ES256KeySet {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ES256KeySetError("\(path): no such file (a key set, as `siwa receipts jwks` prints it)")
        }
        guard !isDirectory.boolValue else { throw ES256KeySetError("\(path): is a directory, not a key set file") }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ES256KeySetError("\(path): cannot be read (check its owner and permissions)")
        }
        guard data.count <= maximumFileBytes else { throw ES256KeySetError("\(path): \(data.count) bytes, too large to be a key set") }
        do { return try ES256KeySet(jwks: data) } catch { throw ES256KeySetError("\(path): \(error)") }
    }
}

/// Why a key set cannot be used: one line; the caller adds the file's name.
public struct ES256KeySetError: Error, Sendable, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
