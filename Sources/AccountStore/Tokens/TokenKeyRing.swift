import Crypto
import Foundation

/// A token as stored in `siwa.apple_tokens`: the id of the key that sealed
/// it and AES-GCM's combined box (12-byte nonce ‖ ciphertext ‖ 16-byte tag).
public struct SealedToken: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public let keyID: String
    public let bytes: Data

    public init(keyID: String, bytes: Data) {
        self.keyID = keyID
        self.bytes = bytes
    }

    /// Never the bytes: a description ends up in logs.
    public var description: String { "SealedToken(key \(keyID), \(bytes.count) bytes)" }
    public var debugDescription: String { description }
}

/// Why a token could not be sealed or opened, or a key ring not loaded.
/// No case carries a token, plaintext or sealed, or key material.
public enum TokenKeyRingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The key ring file is unusable: one line naming the file, the line
    /// (when it is about one) and what is wrong with it.
    case file(path: String, line: Int?, problem: String)
    /// The ciphertext names a key the ring does not hold.
    case unknownKey(id: String)
    /// Authentication failed: the ciphertext was sealed for another user id
    /// or client id (copied from another row), or altered.
    case notThisRow

    public var description: String {
        switch self {
        case .file(let path, let line?, let problem): "\(path) line \(line): \(problem)"
        case .file(let path, nil, let problem): "\(path): \(problem)"
        case .unknownKey(let id): "no key '\(id)' in the token key ring (was it removed before `siwa tokens rekey` ran?)"
        case .notThisRow: "the ciphertext does not belong to this row (another user id or client id, or altered)"
        }
    }
}

/// The keys that encrypt Apple's tokens at rest (AES-256-GCM): the first
/// seals, every key opens, so a new key goes first and the old ones stay
/// until `siwa tokens rekey` has moved every row to it.
///
/// Each ciphertext's associated data binds it to its row (user id, client
/// id) and to its key id, so a ciphertext copied to another row, or
/// relabelled with another key id, fails to open instead of handing one
/// user's token to another.
public struct TokenKeyRing: Sendable {
    struct Key: Sendable {
        let id: String
        let key: SymmetricKey
    }

    let keys: [Key]

    /// The key that seals.
    public var currentKeyID: String { keys[0].id }
    public var keyIDs: [String] { keys.map(\.id) }

    /// - Parameter keys: id and 32 bytes each, the sealing key first.
    public init(keys: [(id: String, bytes: Data)]) throws {
        guard !keys.isEmpty else { throw TokenKeyRingError.file(path: "key ring", line: nil, problem: "holds no key") }
        var seen = Set<String>()
        for key in keys {
            guard Self.isValidKeyID(key.id) else { throw TokenKeyRingError.file(path: "key ring", line: nil, problem: Self.keyIDRule) }
            guard key.bytes.count == 32 else {
                throw TokenKeyRingError.file(path: "key ring", line: nil, problem: "key '\(key.id)' is \(key.bytes.count) bytes; AES-256 needs 32")
            }
            guard seen.insert(key.id).inserted else {
                throw TokenKeyRingError.file(path: "key ring", line: nil, problem: "key id '\(key.id)' appears twice")
            }
        }
        self.keys = keys.map { Key(id: $0.id, key: SymmetricKey(data: $0.bytes)) }
    }

    public func seal(_ plaintext: String, userID: Int64, clientID: String) throws -> SealedToken {
        let key = keys[0]
        let box = try AES.GCM.seal(Data(plaintext.utf8), using: key.key, nonce: AES.GCM.Nonce(),
                                   authenticating: Self.associatedData(keyID: key.id, userID: userID, clientID: clientID))
        // `combined` is nil only for a nonce that is not 12 bytes; ours is.
        guard let combined = box.combined else { throw CryptoKitError.incorrectParameterSize }
        return SealedToken(keyID: key.id, bytes: combined)
    }

    public func open(_ sealed: SealedToken, userID: Int64, clientID: String) throws -> String {
        guard let key = keys.first(where: { $0.id == sealed.keyID }) else { throw TokenKeyRingError.unknownKey(id: sealed.keyID) }
        let plaintext: Data
        do {
            let box = try AES.GCM.SealedBox(combined: sealed.bytes)
            plaintext = try AES.GCM.open(box, using: key.key,
                                         authenticating: Self.associatedData(keyID: key.id, userID: userID, clientID: clientID))
        } catch {
            throw TokenKeyRingError.notThisRow
        }
        // Authenticated, so these are the bytes `seal` was given: UTF-8.
        return String(decoding: plaintext, as: UTF8.self)
    }

    /// A fixed label and the key id, user id and client id, each field
    /// length-prefixed (4 bytes, big-endian) so no two different rows
    /// encode alike (plain concatenation would let user 12, client "3x"
    /// pass for user 123, client "x").
    static func associatedData(keyID: String, userID: Int64, clientID: String) -> Data {
        var data = Data()
        func field(_ bytes: some Collection<UInt8>) {
            withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { data.append(contentsOf: $0) }
            data.append(contentsOf: bytes)
        }
        field(Array("siwa.apple_tokens.v1".utf8))
        field(Array(keyID.utf8))
        withUnsafeBytes(of: userID.bigEndian) { field(Array($0)) }
        field(Array(clientID.utf8))
        return data
    }

    /// A new line for the key ring file: `id:` and 32 random bytes in base64.
    public static func newKeyLine(id: String) -> String {
        id + ":" + SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }.base64EncodedString()
    }

    static let keyIDRule = "a key id is 1 to 32 characters of A-Z, a-z, 0-9, '.', '_' and '-'"

    public static func isValidKeyID(_ id: String) -> Bool {
        (1...32).contains(id.utf8.count) && id.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): true
            default: false
            }
        }
    }
}
