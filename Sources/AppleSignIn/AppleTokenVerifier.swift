import Crypto
import CryptoExtras
import Foundation

/// What every Apple token must satisfy, for notifications and identity
/// tokens: which client ids it may be for, and how much clock skew is forgiven.
public struct VerificationPolicy: Sendable {
    /// The only `iss` accepted.
    public static let appleIssuer = "https://appleid.apple.com"

    /// The earliest `iat` accepted: 2019-01-01T00:00:00Z (Sign in with Apple
    /// began in June 2019). Together with "not after now + leeway" this keeps
    /// every verified time a sane date, whatever number a token carries.
    public static let earliestIssuedAt: TimeInterval = 1_546_300_800
    /// The longest `exp - iat` accepted: 7 days. Apple's notifications and
    /// identity tokens live one day (older identity tokens ten minutes).
    public static let maximumLifetime: TimeInterval = 7 * 86_400

    /// Accepted `aud` values: the app's client ids (bundle id, services id).
    public var audiences: Set<String>
    /// Clock skew tolerated on `exp` and `iat`.
    public var leeway: TimeInterval
    /// The clock; injected so the genuine (expired) Apple tokens can be checked.
    public var now: @Sendable () -> Date

    /// - Parameters:
    ///   - audiences: your client ids: the bundle id of each app, the services id of each website.
    ///   - leeway: seconds of clock skew forgiven on `exp` and `iat` (60).
    ///   - now: the clock (tests give a fixed one).
    public init(audiences: Set<String>, leeway: TimeInterval = 60, now: @escaping @Sendable () -> Date = { Date() }) {
        self.audiences = audiences
        self.leeway = leeway
        self.now = now
    }
}

/// A token whose signature and registered claims have been checked.
struct VerifiedJWS: Sendable {
    let payload: Data
    let claims: RegisteredClaims
    let audience: String
    let issuedAt: Date
    let expiresAt: Date
}

/// The registered claims and a verifier's own, read from one decoder.
private struct BothClaims<More: Decodable>: Decodable {
    let registered: RegisteredClaims
    let more: Result<More, any Error>

    init(registered: RegisteredClaims, more: Result<More, any Error>) {
        self.registered = registered
        self.more = more
    }

    /// Claims of plain members (a notification's, an identity token's),
    /// read without JSONDecoder when `More` can be; nil: ask JSONDecoder.
    init?(plain payload: Data) {
        guard let plainType = More.self as? any PlainClaims.Type,
              let object = payload.withUnsafeBytes({ PlainJSONObject($0) }),
              let registered = RegisteredClaims(plain: object),
              let more = plainType.init(plain: object) as? More
        else { return nil }
        self.init(registered: registered, more: .success(more))
    }

    init(from decoder: any Decoder) throws {
        registered = try RegisteredClaims(from: decoder)
        more = Result { try More(from: decoder) }
    }
}

/// Claims that `PlainJSONObject` can read as their `init(from:)` does:
/// nil for anything it would not read exactly alike (the caller then asks
/// JSONDecoder, which decides, refusals and their reasons included).
protocol PlainClaims {
    init?(plain object: PlainJSONObject)
}

/// Nothing beyond the registered claims.
struct NoMoreClaims: Decodable, PlainClaims {
    init() {}
    init?(plain object: PlainJSONObject) {}
}

/// The machinery both verifiers share: RS256 only, no `crit`, Apple's key
/// for the `kid`, then `iss`, `aud`, `iat`, `exp`.
struct AppleTokenVerifier: Sendable {
    let keys: AppleKeySet
    let policy: VerificationPolicy

    func verify(_ token: String) async throws -> VerifiedJWS {
        try await verify(token, alsoDecoding: NoMoreClaims.self).0
    }

    /// `verify`, and `Claims` decoded from the same pass over the payload
    /// (one JSON parse, not two). Its outcome is judged by the caller, after
    /// the registered claims: a token with the wrong issuer is
    /// `wrong_issuer` whatever else is wrong with it.
    func verify<Claims: Decodable>(_ token: String, alsoDecoding: Claims.Type) async throws
        -> (VerifiedJWS, Result<Claims, any Error>) {
        let jws = try CompactJWS(token)
        guard let alg = jws.header.alg else { throw VerificationFailure.malformedHeader("alg is missing") }
        // Apple signs with RS256 and nothing else. Checking the header first
        // closes the classic holes: `none`, and HS256 keyed with the public key.
        // The associated value is only ever a registered name (never header bytes).
        guard alg == "RS256" else {
            throw VerificationFailure.unsupportedAlgorithm(VerificationFailure.registeredAlgorithms.contains(alg) ? alg : "")
        }
        // siwa implements no JWS extension, so any `crit` makes the JWS invalid
        // (RFC 7515 §4.1.11); a malformed one was refused while parsing.
        guard jws.header.critical == nil else { throw VerificationFailure.unsupportedCritical }
        guard !jws.signature.isEmpty else { throw VerificationFailure.badSignature }
        guard let kid = jws.header.kid, !kid.isEmpty else { throw VerificationFailure.missingKeyID }
        guard kid.utf8.count <= 64 else { throw VerificationFailure.malformedHeader("kid is too long") }

        let key = try await keys.key(for: kid)
        let signature = _RSA.Signing.RSASignature(rawRepresentation: jws.signature)
        let digest = SHA256.hash(data: jws.signingInput)
        guard key.isValidSignature(signature, for: digest, padding: .insecurePKCS1v1_5) else {
            throw VerificationFailure.badSignature
        }

        let both: BothClaims<Claims>
        if let plain = BothClaims<Claims>(plain: jws.payload) {
            both = plain
        } else {
            do { both = try JSONDecoder().decode(BothClaims<Claims>.self, from: jws.payload) } catch {
                throw VerificationFailure.malformedClaims(Self.describe(error))
            }
        }
        let claims = both.registered
        guard claims.iss == VerificationPolicy.appleIssuer else { throw VerificationFailure.wrongIssuer }
        guard let audiences = claims.aud?.values, !audiences.isEmpty else { throw VerificationFailure.missingAudience }
        guard let audience = audiences.first(where: policy.audiences.contains) else { throw VerificationFailure.wrongAudience }
        guard let exp = claims.exp else { throw VerificationFailure.missingExpiry }
        guard let iat = claims.iat else { throw VerificationFailure.missingIssuedAt }
        let now = policy.now().timeIntervalSince1970
        // Bounds first: past them, iat and exp are sane dates (as Date, in
        // JSON, as a PostgreSQL timestamptz) whatever the token said.
        guard iat.isFinite, iat >= VerificationPolicy.earliestIssuedAt else { throw VerificationFailure.issuedAtOutOfRange }
        guard iat <= now + policy.leeway else { throw VerificationFailure.issuedInFuture }
        guard exp.isFinite, exp > iat, exp - iat <= VerificationPolicy.maximumLifetime else {
            throw VerificationFailure.expiryOutOfRange
        }
        guard now <= exp + policy.leeway else { throw VerificationFailure.expired }
        let verified = VerifiedJWS(
            payload: jws.payload, claims: claims, audience: audience,
            issuedAt: Date(timeIntervalSince1970: iat), expiresAt: Date(timeIntervalSince1970: exp)
        )
        return (verified, both.more)
    }

    /// A decoding error in a few words: which field, never the value.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "not a JSON object" }
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map(\.stringValue).filter { !$0.isEmpty }
            return keys.isEmpty ? "document" : keys.joined(separator: ".")
        }
        switch error {
        case .typeMismatch(_, let context): return "\(path(context)) has the wrong type"
        case .valueNotFound(_, let context): return "\(path(context)) is null"
        case .keyNotFound(let key, _): return "\(key.stringValue) is missing"
        case .dataCorrupted(let context): return context.codingPath.isEmpty ? "not a JSON object" : "\(path(context)) is invalid"
        @unknown default: return "not a JSON object"
        }
    }
}
