import Crypto
import Foundation

/// Compact JWS with ES256 (ECDSA P-256, SHA-256), as siwa signs them: the
/// client secret it sends Apple, and the deletion receipts it hands out.
/// The signature is the raw R‖S pair (64 bytes), as JOSE has it, not DER.
public enum ES256JWS {
    /// `base64url(header).base64url(claims).base64url(R‖S)`, both objects
    /// in sorted-key JSON with unescaped slashes.
    public static func sign(header: some Encodable, claims: some Encodable,
                            with key: P256.Signing.PrivateKey) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let input = Base64URL.encode(try encoder.encode(header)) + "." + Base64URL.encode(try encoder.encode(claims))
        let signature = try key.signature(for: Data(input.utf8))
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// A JWS whose signature checked out with one of the keys.
    public struct Verified: Sendable {
        public let keyID: String
        /// The header's `typ`, if it has one.
        public let type: String?
        public let payload: Data
    }

    /// Checks `token`'s ES256 signature with the key its `kid` names in
    /// `keys`. Only the signature and the header are checked: what the
    /// payload must hold is the caller's business.
    public static func verify(_ token: String, keys: [String: P256.Signing.PublicKey]) throws(ES256Failure) -> Verified {
        let jws: CompactJWS
        switch Result(catching: { () throws(VerificationFailure) -> CompactJWS in try CompactJWS(token) }) {
        case .success(let parsed): jws = parsed
        case .failure(let failure): throw .malformed(failure.detail)
        }
        guard jws.header.alg == "ES256" else {
            throw .unsupportedAlgorithm(jws.header.alg.map(VerificationFailure.printable) ?? "none given")
        }
        guard jws.header.critical == nil else { throw .unsupportedCritical }
        guard let kid = jws.header.kid, !kid.isEmpty else { throw .missingKeyID }
        guard let key = keys[kid] else { throw .unknownKeyID(VerificationFailure.printable(kid)) }
        guard jws.signature.count == 64, let signature = try? P256.Signing.ECDSASignature(rawRepresentation: jws.signature),
              key.isValidSignature(signature, for: jws.signingInput) else { throw .badSignature(kid) }
        return Verified(keyID: kid, type: jws.header.typ, payload: jws.payload)
    }
}

/// Why an ES256 JWS did not verify; one printable line, never the token.
public enum ES256Failure: Error, Sendable, Equatable, CustomStringConvertible {
    case malformed(String)
    case unsupportedAlgorithm(String)
    case unsupportedCritical
    case missingKeyID
    case unknownKeyID(String)
    case badSignature(String)

    public var description: String {
        switch self {
        case .malformed(let why): why
        case .unsupportedAlgorithm(let alg): "alg is \(alg), not ES256"
        case .unsupportedCritical: "the header lists critical extensions (crit); none is implemented"
        case .missingKeyID: "the header has no kid"
        case .unknownKeyID(let kid): "kid \(kid) is not in the key set"
        case .badSignature(let kid): "the signature does not verify with key \(kid)"
        }
    }
}
