import Crypto
import Foundation
import NIOCore
import PostgresNIO

/// The hash chain over `siwa.audit_log` (sql/009_audit_chain.sql): each
/// sealed row's `row_hash` in `siwa.audit_chain` is SHA-256 over its
/// canonical encoding, which begins with the `row_hash` of the sealed row
/// before it. The sealer and the verifier both hash here, in siwa, from the
/// rows' stored values: nothing in the database (a function a superuser
/// could replace) takes part.
///
/// The canonical encoding, version 1 (docs/audit-and-receipts.md, "The hash chain"):
///
///     "siwa.audit_log/v1" ‖ prev_hash (32 bytes) ‖ int8 seq
///     ‖ int8 occurred_at (microseconds since 1970-01-01 UTC)
///     ‖ text actor ‖ text action ‖ text apple_sub ‖ text details
///
/// and version 2, for the rows that name the role that wrote them
/// (`db_user`, stamped since sql/017; rows written before have none and
/// keep version 1, so chains sealed before still verify):
///
///     "siwa.audit_log/v2" ‖ (version 1's fields, in its order) ‖ text db_user
///
/// and version 3, for the rows that name the team of their sub
/// (`apple_team`, since sql/024; rows written before have none):
///
///     "siwa.audit_log/v3" ‖ (version 2's fields, in its order) ‖ text apple_team
///
/// int8: 8 bytes, big-endian two's complement; text: its UTF-8 byte count
/// as a 4-byte big-endian integer, then the bytes, and -1 alone for NULL;
/// details is jsonb's own text form (`details::text`). The version follows
/// from the row (apple_team, then db_user, NULL or not): clearing or setting
/// either changes the hash like any other edit.
public enum AuditChain {
    /// The first sealed row's prev_hash.
    public static let genesis = [UInt8](repeating: 0, count: 32)
    static let versionTag = Array("siwa.audit_log/v1".utf8)
    static let versionTagWithRole = Array("siwa.audit_log/v2".utf8)
    static let versionTagWithTeam = Array("siwa.audit_log/v3".utf8)

    /// The columns both the sealer and the verifier read, in `AuditRow`'s
    /// order, from `siwa.audit_log` as `l`.
    static let rowColumns = "l.seq, l.occurred_at, l.actor, l.action, l.apple_sub, l.details::text, l.db_user, l.apple_team"

    /// The row_hash of `row` sealed after a row whose row_hash is `prev`.
    static func rowHash(prev: [UInt8], _ row: AuditRow) -> [UInt8] {
        var hasher = SHA256()
        hasher.update(data: row.appleTeam != nil ? versionTagWithTeam : row.dbUser == nil ? versionTag : versionTagWithRole)
        hasher.update(data: prev)
        hasher.update(int8: row.seq)
        hasher.update(int8: row.occurredAt.microsecondsSince1970)
        hasher.update(text: row.actor)
        hasher.update(text: row.action)
        hasher.update(text: row.appleSub)
        hasher.update(text: row.details)
        if row.appleTeam != nil || row.dbUser != nil { hasher.update(text: row.dbUser) }
        if let appleTeam = row.appleTeam { hasher.update(text: appleTeam) }
        return Array(hasher.finalize())
    }
}

/// One audit row's values as stored, for hashing: text as its UTF-8 bytes
/// (the wire's binary form of text), never re-encoded.
struct AuditRow {
    var seq: Int64
    var occurredAt: ExactTimestamp
    var actor: ByteBuffer
    var action: ByteBuffer
    var appleSub: ByteBuffer?
    var details: ByteBuffer
    /// nil on rows written before sql/017 (encoding version 1).
    var dbUser: ByteBuffer?
    /// nil on rows written before sql/024, and on rows naming no sub.
    var appleTeam: ByteBuffer?

    init(_ values: (Int64, ExactTimestamp, ByteBuffer, ByteBuffer, ByteBuffer?, ByteBuffer, ByteBuffer?, ByteBuffer?)) {
        (seq, occurredAt, actor, action, appleSub, details, dbUser, appleTeam) = values
    }
}

/// A timestamptz to the microsecond, as PostgreSQL stores it (a Date would
/// round it): the binary wire form is microseconds since 2000-01-01 UTC.
struct ExactTimestamp: PostgresDecodable {
    static let postgresEpochSince1970: Int64 = 946_684_800_000_000
    let microsecondsSince1970: Int64

    init<JSONDecoder: PostgresJSONDecoder>(from buffer: inout ByteBuffer, type: PostgresDataType, format: PostgresFormat,
                                           context: PostgresDecodingContext<JSONDecoder>) throws {
        guard type == .timestamptz, format == .binary, let micros = buffer.readInteger(as: Int64.self) else {
            throw PostgresDecodingError.Code.typeMismatch
        }
        microsecondsSince1970 = micros + Self.postgresEpochSince1970
    }
}

extension SHA256 {
    fileprivate mutating func update(int8 value: Int64) {
        withUnsafeBytes(of: value.bigEndian) { update(bufferPointer: $0) }
    }

    fileprivate mutating func update(text: ByteBuffer?) {
        guard let text else { return update(int4: -1) }
        update(int4: Int32(text.readableBytes))
        text.withUnsafeReadableBytes { update(bufferPointer: $0) }
    }

    private mutating func update(int4 value: Int32) {
        withUnsafeBytes(of: value.bigEndian) { update(bufferPointer: $0) }
    }
}

/// A point of the chain, `SEQ:HASH` (the hash in lowercase hex): what
/// `siwa audit head` prints and `siwa audit verify --head` takes back.
public struct AuditChainLink: Sendable, Equatable, CustomStringConvertible {
    public let seq: Int64
    public let hash: [UInt8]

    public init(seq: Int64, hash: [UInt8]) {
        self.seq = seq
        self.hash = hash
    }

    /// nil unless `SEQ:HASH` with a positive seq and 64 hex digits.
    public init?(_ text: String) {
        let parts = text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let seq = Int64(parts[0]), seq > 0, parts[1].count == 64 else { return nil }
        var bytes: [UInt8] = []
        var digits = parts[1].makeIterator()
        while let high = digits.next(), let low = digits.next() {
            guard let byte = UInt8(String([high, low]), radix: 16) else { return nil }
            bytes.append(byte)
        }
        self.init(seq: seq, hash: bytes)
    }

    public var hashHex: String { hash.hexLowercased }
    public var description: String { "\(seq):\(hashHex)" }
}
