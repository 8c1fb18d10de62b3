/// Why a token was refused. Each case has a stable machine-readable `reason`
/// that the HTTP layer returns, the rejection table stores and `siwa verify`
/// prints; `detail` is a short human sentence that never echoes the token:
/// the strings cases carry are siwa's own words, and `detail` passes them
/// through `VerificationFailure.printable` anyway (printable ASCII, no quote or
/// backslash, at most 160 bytes), so no attacker byte reaches an answer, a
/// log line or the rejection table.
public enum VerificationFailure: Error, Sendable, Equatable {
    case malformedToken(String)
    case malformedHeader(String)
    /// The `alg` the header named; `detail` names it only when it is one of
    /// the registered JWS algorithm names, never arbitrary header bytes.
    case unsupportedAlgorithm(String)
    /// A well-formed `crit` header: it names extensions siwa does not
    /// implement (it implements none), so the JWS is invalid (RFC 7515 §4.1.11).
    case unsupportedCritical
    case missingKeyID
    case unknownKeyID
    case badSignature
    case malformedClaims(String)
    case wrongIssuer
    case missingAudience
    case wrongAudience
    case missingExpiry
    case expired
    /// `exp` is not after `iat`, or more than `VerificationPolicy.maximumLifetime` after it.
    case expiryOutOfRange
    case missingIssuedAt
    case issuedInFuture
    /// `iat` is before `VerificationPolicy.earliestIssuedAt` (2019-01-01), or not a finite number.
    case issuedAtOutOfRange
    case missingJTI
    case malformedEvents(String)
    case missingSubject
    case nonceMismatch
    /// A nonce was expected and the token has none, without saying
    /// `nonce_supported: false` (older devices, which cannot carry one).
    case nonceMissing
    case malformedIdentityClaims(String)

    /// A stable, machine-readable code (`expired`, `wrong_aud`, `nonce_mismatch`, ...):
    /// answer it, count it, alert on it; it does not change between releases.
    public var reason: String {
        switch self {
        case .malformedToken: "malformed_token"
        case .malformedHeader: "malformed_header"
        case .unsupportedAlgorithm: "unsupported_alg"
        case .unsupportedCritical: "unsupported_crit"
        case .missingKeyID: "missing_kid"
        case .unknownKeyID: "unknown_kid"
        case .badSignature: "bad_signature"
        case .malformedClaims: "malformed_claims"
        case .wrongIssuer: "wrong_issuer"
        case .missingAudience: "missing_aud"
        case .wrongAudience: "wrong_aud"
        case .missingExpiry: "missing_exp"
        case .expired: "expired"
        case .expiryOutOfRange: "exp_out_of_range"
        case .missingIssuedAt: "missing_iat"
        case .issuedInFuture: "iat_in_future"
        case .issuedAtOutOfRange: "iat_out_of_range"
        case .missingJTI: "missing_jti"
        case .malformedEvents: "malformed_events"
        case .missingSubject: "missing_sub"
        case .nonceMismatch: "nonce_mismatch"
        case .nonceMissing: "nonce_missing"
        case .malformedIdentityClaims: "malformed_identity_claims"
        }
    }

    /// A short sentence for a person (an answer's body, a log line); never
    /// any byte of the token.
    public var detail: String { Self.printable(sentence) }

    private var sentence: String {
        switch self {
        case .malformedToken(let why): "token is not a compact JWS: \(why)"
        case .malformedHeader(let why): "JWS header is invalid: \(why)"
        case .unsupportedAlgorithm(let alg):
            Self.registeredAlgorithms.contains(alg)
                ? "alg \(alg) is not accepted; Apple signs with RS256"
                : "alg is not a registered JWS algorithm; Apple signs with RS256"
        case .unsupportedCritical: "JWS header lists critical extensions (crit); siwa implements none"
        case .missingKeyID: "JWS header has no kid"
        case .unknownKeyID: "kid is not in Apple's current key set"
        case .badSignature: "signature does not verify with Apple's key for this kid"
        case .malformedClaims(let why): "claims are invalid: \(why)"
        case .wrongIssuer: "iss is not https://appleid.apple.com"
        case .missingAudience: "aud is missing"
        case .wrongAudience: "aud is not one of the configured client ids"
        case .missingExpiry: "exp is missing"
        case .expired: "token has expired"
        case .expiryOutOfRange: "exp is not after iat, or more than 7 days after it"
        case .missingIssuedAt: "iat is missing"
        case .issuedInFuture: "iat is in the future"
        case .issuedAtOutOfRange: "iat is before 2019-01-01 or not a valid time"
        case .missingJTI: "jti is missing"
        case .malformedEvents(let why): "events claim is invalid: \(why)"
        case .missingSubject: "sub is missing"
        case .nonceMismatch: "nonce does not match the expected nonce"
        case .nonceMissing: "a nonce was given and the token has none (and does not say nonce_supported: false)"
        case .malformedIdentityClaims(let why): "identity token claims are invalid: \(why)"
        }
    }

    /// The JWS algorithm names of the IANA registry (RFC 7518 and later):
    /// the only `alg` values a detail may name.
    static let registeredAlgorithms: Set<String> = [
        "none", "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "ES512",
        "PS256", "PS384", "PS512", "EdDSA", "ES256K", "Ed25519", "Ed448",
    ]

    /// Longest detail, in bytes.
    public static let maximumDetailBytes = 160

    /// `text` reduced to printable ASCII without `"` and `\` (anything else
    /// becomes `?`), at most `maximumDetailBytes` bytes: safe in a JSON
    /// answer, a log line and a PostgreSQL text column as it is.
    public static func printable(_ text: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(min(text.utf8.count, maximumDetailBytes))
        for byte in text.utf8 {
            guard bytes.count < maximumDetailBytes else { break }
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "?"))
            case 0x20...0x7E: bytes.append(byte)
            default:
                // One `?` per character, not per byte: skip UTF-8 continuation bytes.
                if byte & 0xC0 != 0x80 { bytes.append(UInt8(ascii: "?")) }
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Apple's keys cannot be had right now (never loaded, or the refetch for an
/// unknown kid failed). Not the sender's fault: the caller should answer
/// "try again later" (503) so Apple retries.
public struct AppleKeysUnavailable: Error, Sendable, CustomStringConvertible {
    /// Why, in siwa's words.
    public let detail: String
    public init(_ detail: String) { self.detail = detail }
    public var description: String { "Apple's signing keys are unavailable: \(detail)" }
}
