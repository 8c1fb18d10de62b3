import AccountStore
import AppleSignIn
import Crypto
import Foundation

/// Signs the worker's deletion receipts (ES256) with the key of
/// SIWA_RECEIPT_KEY_FILE, as `SIWA_RECEIPT_ISSUER`. Printing it shows the
/// issuer and key id, never the key.
public struct DeletionReceiptSigner: ReceiptSigning, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let key: P256.Signing.PrivateKey
    public let issuer: String
    /// The JWS `kid`: the public key's RFC 7638 thumbprint.
    public let keyID: String
    private let now: @Sendable () -> Date

    public init(key: P256.Signing.PrivateKey, issuer: String, now: @escaping @Sendable () -> Date = { Date() }) {
        self.key = key
        self.issuer = issuer
        self.keyID = ES256KeySet.thumbprint(key.publicKey)
        self.now = now
    }

    /// The key set that verifies this signer's receipts (`siwa receipts jwks`).
    public var publicKeys: ES256KeySet { ES256KeySet([key.publicKey]) }

    struct Header: Encodable {
        let alg = "ES256"
        let kid: String
        let typ = DeletionReceipt.type
    }

    public func sign(_ facts: PurgeFacts) throws -> SignedReceipt {
        let jti = UUID().uuidString.lowercased()
        let claims = DeletionReceipt(issuer: issuer, jti: jti, issuedAt: now(), facts: facts)
        return SignedReceipt(jti: jti, keyID: keyID, jws: try ES256JWS.sign(header: Header(kid: keyID), claims: claims, with: key))
    }

    /// A new signing key, PKCS#8 PEM (`siwa receipts keygen`).
    public static func newKeyPEM() -> String { P256.Signing.PrivateKey().pemRepresentation }

    /// The key in `keyFile` (PKCS#8 PEM, P-256); errors are one line naming the file.
    public static func load(keyFile: String, issuer: String) throws(P256KeyFileError) -> DeletionReceiptSigner {
        let naming = P256KeyFile.Naming(kind: "a receipt key",
                                        missingHint: "the deletion-receipt signing key; make one with `siwa receipts keygen`")
        return DeletionReceiptSigner(key: try P256KeyFile.load(path: keyFile, naming: naming), issuer: issuer)
    }

    public var description: String { "DeletionReceiptSigner(issuer: \(issuer), kid: \(keyID))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["issuer": issuer, "keyID": keyID]) }
}

/// The audit chain's head, signed with the receipt key (SignedAuditHead.swift).
extension DeletionReceiptSigner {
    struct HeadHeader: Encodable {
        let alg = "ES256"
        let kid: String
        let typ = SignedAuditHead.type
    }

    /// The chain's head `head`, sealed at `sealedAt`, signed now.
    public func sign(head: AuditChainLink, sealedAt: Date) throws -> String {
        let claims = SignedAuditHead(issuer: issuer, issuedAt: now(), head: head, sealedAt: sealedAt)
        return try ES256JWS.sign(header: HeadHeader(kid: keyID), claims: claims, with: key)
    }
}
