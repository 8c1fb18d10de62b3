import AccountStore
import AppleSignIn
import Foundation

/// The audit chain's head, signed with the receipt key (ES256 compact JWS,
/// header `typ` `siwa-audit-head+jwt`, the same key and key set as the
/// deletion receipts): what `siwa audit head --signed` prints and the
/// worker logs. Kept away from the database, it anchors the chain: whoever
/// rewrites rows and recomputes every hash after it (the database's owner,
/// a superuser) cannot make the chain hold the head's hash at its seq
/// again, nor sign a head of their own without the key
/// (`siwa audit verify --head FILE`).
public struct SignedAuditHead: Codable, Sendable, Equatable {
    public static let type = "siwa-audit-head+jwt"

    public let iss: String
    public let iat: Int64
    public let head: Head

    public struct Head: Codable, Sendable, Equatable {
        public let seq: Int64
        /// Lowercase hex, as `siwa audit head` prints it.
        public let rowHash: String
        /// When the sealer sealed the row (UTC, ISO 8601 with milliseconds).
        public let sealedAt: String

        enum CodingKeys: String, CodingKey { case seq, rowHash = "row_hash", sealedAt = "sealed_at" }
    }

    public init(issuer: String, issuedAt: Date, head: AuditChainLink, sealedAt: Date) {
        iss = issuer
        iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        self.head = Head(seq: head.seq, rowHash: head.hashHex, sealedAt: DeletionReceipt.time(sealedAt))
    }

    /// The head as `siwa audit verify` checks it.
    public var link: AuditChainLink? { AuditChainLink("\(head.seq):\(head.rowHash)") }

    /// Checks the signature with `keys`, the header's `typ` and the claims'
    /// shape. The failure is one line, never the token.
    public static func verify(_ jws: String, keys: ES256KeySet) throws(ReceiptVerificationFailure) -> (head: SignedAuditHead, keyID: String) {
        let verified: ES256JWS.Verified
        do { verified = try ES256JWS.verify(jws, keys: keys.byKeyID) } catch {
            throw ReceiptVerificationFailure("\(error)")
        }
        guard verified.type == type else {
            throw ReceiptVerificationFailure("the header's typ is not \(type): not a signed siwa audit head")
        }
        guard let head = try? JSONDecoder().decode(SignedAuditHead.self, from: verified.payload), head.link != nil else {
            throw ReceiptVerificationFailure("the claims are not a signed audit head's (iss, iat, head: seq, row_hash, sealed_at)")
        }
        return (head, verified.keyID)
    }
}
