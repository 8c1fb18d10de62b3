/// Why a token was refused. Each case has a stable machine-readable `reason`
/// that the HTTP layer returns, the rejection table stores and `siwa verify`
/// prints; `detail` is a short human sentence that never echoes the token.
public enum VerificationFailure: Error, Sendable, Equatable {
    case malformedToken(String)
    case malformedHeader(String)
    case unsupportedAlgorithm(String)
    case missingKeyID
    case unknownKeyID
    case badSignature
    case malformedClaims(String)
    case wrongIssuer
    case missingAudience
    case wrongAudience
    case missingExpiry
    case expired
    case missingIssuedAt
    case issuedInFuture
    case missingJTI
    case malformedEvents(String)
    case missingSubject
    case nonceMismatch
    case malformedIdentityClaims(String)

    public var reason: String {
        switch self {
        case .malformedToken: "malformed_token"
        case .malformedHeader: "malformed_header"
        case .unsupportedAlgorithm: "unsupported_alg"
        case .missingKeyID: "missing_kid"
        case .unknownKeyID: "unknown_kid"
        case .badSignature: "bad_signature"
        case .malformedClaims: "malformed_claims"
        case .wrongIssuer: "wrong_issuer"
        case .missingAudience: "missing_aud"
        case .wrongAudience: "wrong_aud"
        case .missingExpiry: "missing_exp"
        case .expired: "expired"
        case .missingIssuedAt: "missing_iat"
        case .issuedInFuture: "iat_in_future"
        case .missingJTI: "missing_jti"
        case .malformedEvents: "malformed_events"
        case .missingSubject: "missing_sub"
        case .nonceMismatch: "nonce_mismatch"
        case .malformedIdentityClaims: "malformed_identity_claims"
        }
    }

    public var detail: String {
        switch self {
        case .malformedToken(let why): "token is not a compact JWS: \(why)"
        case .malformedHeader(let why): "JWS header is invalid: \(why)"
        case .unsupportedAlgorithm(let alg): "alg \(alg) is not accepted; Apple signs with RS256"
        case .missingKeyID: "JWS header has no kid"
        case .unknownKeyID: "kid is not in Apple's current key set"
        case .badSignature: "signature does not verify with Apple's key for this kid"
        case .malformedClaims(let why): "claims are invalid: \(why)"
        case .wrongIssuer: "iss is not https://appleid.apple.com"
        case .missingAudience: "aud is missing"
        case .wrongAudience: "aud is not one of the configured client ids"
        case .missingExpiry: "exp is missing"
        case .expired: "token has expired"
        case .missingIssuedAt: "iat is missing"
        case .issuedInFuture: "iat is in the future"
        case .missingJTI: "jti is missing"
        case .malformedEvents(let why): "events claim is invalid: \(why)"
        case .missingSubject: "sub is missing"
        case .nonceMismatch: "nonce does not match the expected nonce"
        case .malformedIdentityClaims(let why): "identity token claims are invalid: \(why)"
        }
    }
}

/// Apple's keys cannot be had right now (never loaded, or the refetch for an
/// unknown kid failed). Not the sender's fault: the caller should answer
/// "try again later" (503) so Apple retries.
public struct AppleKeysUnavailable: Error, Sendable, CustomStringConvertible {
    public let detail: String
    public init(_ detail: String) { self.detail = detail }
    public var description: String { "Apple's signing keys are unavailable: \(detail)" }
}
