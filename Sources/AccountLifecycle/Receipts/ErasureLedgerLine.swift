import AccountStore
import AppleSignIn
import Crypto
import Foundation

/// One line of the erasure ledger: a JSON object, keys in this order,
/// `\n`-terminated, UTF-8:
///
///     {"completed_at":"2026-01-02T03:04:05.678Z","job_id":42,"receipt_id":"<jti>","sub":"001.abc","team":"ABCDE12345","v":2,"jws":"<header>..<signature>"}
///
/// `receipt_id` is the deletion receipt's `jti` (null with receipts off).
/// `team` is the team `sub` belongs to; version 1 lines, written before
/// siwa knew of several teams, have none (the reader names it).
/// `jws` is a compact JWS with a detached payload (RFC 7515, appendix F):
/// ES256 with the receipt key, header `{"alg":"ES256","kid":<thumbprint>,
/// "typ":"siwa-erasure+json"}`, over the line's other fields exactly as
/// written (the line up to `,"jws"`, closed with `}`). A reader rebuilds
/// that text from the fields, so a changed sub, job id, time or receipt id
/// fails the signature. With receipts off (no key) there is no `jws`: the
/// line is unsigned, and `siwa erasures reapply` takes such lines only
/// when told to (`--accept-unsigned`).
public enum ErasureLedgerLine {
    /// The JWS header's `typ`: a ledger line's signature cannot pass for a receipt's.
    public static let type = "siwa-erasure+json"
    public static let version = 2

    /// A line as read back: the fields as written, and the signature's key (nil: unsigned).
    public struct Entry: Sendable, Equatable {
        public let sub: String
        /// nil on a version 1 line.
        public let team: String?
        public let jobID: Int64
        public let completedAt: String
        public let receiptID: String?
        public let keyID: String?
    }

    struct Fields: Decodable {
        let completed_at: String
        let job_id: Int64
        let receipt_id: String?
        let sub: String
        let team: String?
        let v: Int
        let jws: String?
    }

    /// The signed text: every field but `jws`, in the line's own form
    /// (version 1's without `team`).
    static func payload(completedAt: String, jobID: Int64, receiptID: String?, sub: String, team: String?) -> String {
        let head = #"{"completed_at":\#(JSONText.quoted(completedAt)),"job_id":\#(jobID),"receipt_id":\#(receiptID.map(JSONText.quoted) ?? "null"),"sub":\#(JSONText.quoted(sub)),"#
        guard let team else { return head + #""v":1}"# }
        return head + #""team":\#(JSONText.quoted(team)),"v":\#(version)}"#
    }

    /// The line for `record`, `\n` included; signed when `signer` is given.
    public static func encode(_ record: ErasureRecord, signer: ErasureLedgerSigner?) throws -> String {
        let payload = payload(completedAt: DeletionReceipt.time(record.completedAt), jobID: record.jobID,
                              receiptID: record.receiptID, sub: record.sub, team: record.team)
        guard let signer else { return payload + "\n" }
        return String(payload.dropLast()) + #","jws":\#(JSONText.quoted(try signer.detachedJWS(payload)))}"# + "\n"
    }

    /// Reads one line and checks its signature with `keys` (a line with a
    /// `jws` and no keys is refused). An unsigned line is returned with
    /// `keyID` nil: whether to take it is the caller's decision.
    public static func verify(_ line: Substring, keys: ES256KeySet?) throws(ErasureLineFailure) -> Entry {
        let fields: Fields
        do { fields = try JSONDecoder().decode(Fields.self, from: Data(line.utf8)) } catch {
            throw ErasureLineFailure("not an erasure ledger line (a JSON object with completed_at, job_id, receipt_id, sub, team, v)")
        }
        guard fields.v == version || fields.v == 1 else {
            throw ErasureLineFailure("version \(fields.v); this siwa reads versions 1 and \(version)")
        }
        guard (fields.v == 1) == (fields.team == nil) else {
            throw ErasureLineFailure(fields.v == 1 ? "a version 1 line has no team" : "a version \(version) line names its team")
        }
        guard !fields.sub.isEmpty, fields.job_id > 0 else { throw ErasureLineFailure("sub is empty or job_id is not a job id") }
        guard let jws = fields.jws else {
            return Entry(sub: fields.sub, team: fields.team, jobID: fields.job_id, completedAt: fields.completed_at, receiptID: fields.receipt_id, keyID: nil)
        }
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].isEmpty else { throw ErasureLineFailure("jws is not a compact JWS with a detached payload") }
        guard let keys else { throw ErasureLineFailure("the line is signed, and no key set was given to verify it") }
        let payload = payload(completedAt: fields.completed_at, jobID: fields.job_id, receiptID: fields.receipt_id, sub: fields.sub,
                              team: fields.team)
        let attached = "\(parts[0]).\(Base64URL.encode(Data(payload.utf8))).\(parts[2])"
        let verified: ES256JWS.Verified
        do { verified = try ES256JWS.verify(attached, keys: keys.byKeyID) } catch {
            throw ErasureLineFailure("\(error)")
        }
        guard verified.type == type else { throw ErasureLineFailure("the header's typ is not \(type): not an erasure ledger line's signature") }
        return Entry(sub: fields.sub, team: fields.team, jobID: fields.job_id, completedAt: fields.completed_at,
                     receiptID: fields.receipt_id, keyID: verified.keyID)
    }
}

/// Why a ledger line was refused: one printable line, never the line.
public struct ErasureLineFailure: Error, Sendable, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Signs ledger lines with the receipt key (SIWA_RECEIPT_KEY_FILE), so the
/// same public key set (`siwa receipts jwks`) verifies receipts and lines.
/// Printing it shows the key id, never the key.
public struct ErasureLedgerSigner: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let key: P256.Signing.PrivateKey
    /// The RFC 7638 thumbprint of the public key, as the receipts' `kid`.
    public let keyID: String

    public init(key: P256.Signing.PrivateKey) {
        self.key = key
        keyID = ES256KeySet.thumbprint(key.publicKey)
    }

    /// The key in `keyFile`, as DeletionReceiptSigner reads it; errors are one line naming the file.
    public static func load(keyFile: String) throws(P256KeyFileError) -> ErasureLedgerSigner {
        let naming = P256KeyFile.Naming(kind: "a receipt key",
                                        missingHint: "the deletion-receipt signing key; make one with `siwa receipts keygen`")
        return ErasureLedgerSigner(key: try P256KeyFile.load(path: keyFile, naming: naming))
    }

    /// `base64url(header)..base64url(R‖S)` over `base64url(header).base64url(payload)`.
    func detachedJWS(_ payload: String) throws -> String {
        let header = Base64URL.encode(Data(#"{"alg":"ES256","kid":\#(JSONText.quoted(keyID)),"typ":"\#(ErasureLedgerLine.type)"}"#.utf8))
        let signature = try key.signature(for: Data((header + "." + Base64URL.encode(Data(payload.utf8))).utf8))
        return header + ".." + Base64URL.encode(signature.rawRepresentation)
    }

    public var description: String { "ErasureLedgerSigner(kid: \(keyID))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["keyID": keyID]) }
}
