import Foundation

/// Apple's `real_user_status`: how confident Apple is that the user is a real person.
public enum RealUserStatus: Int, Sendable, Codable {
    /// The platform cannot tell (not iOS, or an older iOS).
    case unsupported = 0
    /// Apple could not decide: treat the user as any other, without the benefit of the doubt.
    case unknown = 1
    /// Apple thinks this is very likely a real person.
    case likelyReal = 2

    /// A `real_user_status` claim's value: one outside 0–2 (Apple may add
    /// values) is `unknown`, never a refusal.
    public init(claim value: Int) {
        self = RealUserStatus(rawValue: value) ?? .unknown
    }
}

/// The claims of an identity token (the `id_token` a client gets at
/// sign-in) whose signature and registered claims were verified; read it from
/// ``VerifiedIdentityToken/claims``.
///
/// Apple sends `email_verified`, `is_private_email` and `nonce_supported` as
/// booleans or as the strings `"true"` and `"false"`; both decode to `Bool`.
public struct AppleIdentityToken: Sendable, Decodable, Equatable, PlainClaims {
    /// The user's stable identifier for your team: key your accounts on it
    /// (never on the email address, which the user may hide or change).
    public let sub: String
    /// The user's email address, or their private relay address; Apple
    /// includes it in the first sign-in and, for newer tokens, in later ones.
    public let email: String?
    /// Whether Apple verified `email`. Apple's documents say "always true";
    /// siwa keeps what the token says all the same, so an address that came
    /// unverified (a managed account's, say) is marked so.
    public let emailVerified: Bool?
    /// Whether `email` is a private relay address (`@privaterelay.appleid.com`).
    public let isPrivateEmail: Bool?
    /// The nonce the client passed to Apple, echoed (see ``IdentityTokenVerifier/verify(_:expectedNonce:)``).
    public let nonce: String?
    /// `false` on a platform that cannot carry a nonce.
    public let nonceSupported: Bool?
    /// How confident Apple is that the user is a real person: a value
    /// outside 0–2 (one Apple may add) reads as ``RealUserStatus/unknown``;
    /// ``realUserStatusValue`` keeps it as sent.
    public var realUserStatus: RealUserStatus? { realUserStatusValue.map(RealUserStatus.init(claim:)) }
    /// `real_user_status` as Apple sent it, any integer (Apple sends it on
    /// the first sign-in of a native app only).
    public let realUserStatusValue: Int?
    /// `org_id`: the organization of an Apple Business (managed) account.
    public let orgID: String?
    /// `transfer_sub`: the user's identifier for a team the app is being
    /// transferred to (TN3159), in tokens issued during a transfer.
    public let transferSub: String?
    /// When the user authenticated, in seconds since 1970.
    public let authTime: Double?
    /// The authorization code's hash, when Apple sends one.
    public let cHash: String?
    /// The access token's hash, when Apple sends one.
    public let atHash: String?

    enum CodingKeys: String, CodingKey {
        case sub, email, nonce
        case emailVerified = "email_verified"
        case isPrivateEmail = "is_private_email"
        case nonceSupported = "nonce_supported"
        case realUserStatus = "real_user_status"
        case authTime = "auth_time"
        case cHash = "c_hash"
        case atHash = "at_hash"
        case orgID = "org_id"
        case transferSub = "transfer_sub"
    }

    /// Decodes Apple's claim names (`email_verified`, `real_user_status`, ...).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        sub = try c.decode(String.self, forKey: .sub)
        email = Self.nonEmpty(try c.decodeIfPresent(String.self, forKey: .email))
        emailVerified = try c.decodeIfPresent(FlexibleBool.self, forKey: .emailVerified)?.value
        isPrivateEmail = try c.decodeIfPresent(FlexibleBool.self, forKey: .isPrivateEmail)?.value
        nonce = try c.decodeIfPresent(String.self, forKey: .nonce)
        nonceSupported = try c.decodeIfPresent(FlexibleBool.self, forKey: .nonceSupported)?.value
        realUserStatusValue = try c.decodeIfPresent(Int.self, forKey: .realUserStatus)
        authTime = try c.decodeIfPresent(Double.self, forKey: .authTime)
        cHash = try c.decodeIfPresent(String.self, forKey: .cHash)
        atHash = try c.decodeIfPresent(String.self, forKey: .atHash)
        orgID = Self.nonEmpty(try c.decodeIfPresent(String.self, forKey: .orgID))
        transferSub = Self.nonEmpty(try c.decodeIfPresent(String.self, forKey: .transferSub))
    }

    /// As `init(from:)`, read by `PlainJSONObject` (a sign-in verifies two
    /// identity tokens: the app's and the one Apple's token endpoint returns).
    init?(plain object: PlainJSONObject) {
        guard case .string(let sub)? = object["sub"],
              case let email? = object.optionalString("email"),
              case let emailVerified? = object.optionalFlexibleBool("email_verified"),
              case let isPrivateEmail? = object.optionalFlexibleBool("is_private_email"),
              case let nonce? = object.optionalString("nonce"),
              case let nonceSupported? = object.optionalFlexibleBool("nonce_supported"),
              case let realUserStatus? = object.optionalInteger("real_user_status"),
              case let authTime? = object.optionalNumber("auth_time"),
              case let cHash? = object.optionalString("c_hash"),
              case let atHash? = object.optionalString("at_hash"),
              case let orgID? = object.optionalString("org_id"),
              case let transferSub? = object.optionalString("transfer_sub")
        else { return nil }
        self.sub = sub
        self.email = Self.nonEmpty(email)
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.nonce = nonce
        self.nonceSupported = nonceSupported
        self.realUserStatusValue = realUserStatus
        self.authTime = authTime
        self.cHash = cHash
        self.atHash = atHash
        self.orgID = Self.nonEmpty(orgID)
        self.transferSub = Self.nonEmpty(transferSub)
    }

    /// An empty `email`, `org_id` or `transfer_sub` is none (Apple School
    /// Manager accounts may carry an empty `email`).
    private static func nonEmpty(_ text: String?) -> String? { text.flatMap { $0.isEmpty ? nil : $0 } }

    /// Whether `email` is a private relay address: `is_private_email` when
    /// Apple sends it, else the address's domain (Apple omits the claim in
    /// some tokens whose address is a relay one); nil without an address.
    public var emailIsPrivate: Bool? {
        guard let email else { return nil }
        return isPrivateEmail ?? Self.isRelayAddress(email)
    }

    /// An address at Apple's private email relay, `@privaterelay.appleid.com`.
    public static func isRelayAddress(_ email: String) -> Bool {
        email.lowercased().hasSuffix("@privaterelay.appleid.com")
    }
}

/// What ``IdentityTokenVerifier/verify(_:expectedNonce:)`` returns: a token
/// signed by Apple, for one of your client ids, within its lifetime.
public struct VerifiedIdentityToken: Sendable {
    /// The client id (`aud`) the token was issued for: one of ``VerificationPolicy/audiences``.
    public let audience: String
    /// `iat`.
    public let issuedAt: Date
    /// `exp`.
    public let expiresAt: Date
    /// The user (``AppleIdentityToken/sub``) and what Apple says about them.
    public let claims: AppleIdentityToken
    /// The verified claims as Apple sent them.
    public let claimsJSON: Data
}

/// Verifies the identity tokens an app sends its backend after Sign in with
/// Apple, in-process: no call to Apple per token, only the key set's fetches.
///
/// Make one per process, with one ``AppleKeySet``, and share it:
///
/// ```swift
/// import AppleSignIn
/// import Logging
///
/// let httpClient = HTTPJWKSSource.makeHTTPClient()   // follows no redirect; shut it down at exit
/// let keys = AppleKeySet(source: HTTPJWKSSource(url: HTTPJWKSSource.appleKeysURL, httpClient: httpClient),
///                        logger: Logger(label: "apple-keys"))
/// let verifier = IdentityTokenVerifier(keys: keys, policy: VerificationPolicy(audiences: ["com.example.app"]))
///
/// let token = try await verifier.verify(idToken, expectedNonce: nonceSentToApple)
/// let appleUserID = token.claims.sub
/// ```
///
/// Checks, in order: the compact JWS form, `alg` RS256 only (never `none` or
/// HMAC), no `crit`, Apple's key for the `kid` (fetched once more when the
/// `kid` is unknown, at most once per cooldown) and the signature; then `iss`
/// is Apple, `aud` is one of the policy's client ids, `iat` and `exp` are sane
/// and current (with the policy's leeway), `sub` is there, and the nonce
/// matches when one is expected.
public struct IdentityTokenVerifier: Sendable {
    let base: AppleTokenVerifier

    /// - Parameters:
    ///   - keys: Apple's key set; share one per process so its cache and
    ///     refetch cooldown work across requests.
    ///   - policy: your client ids (bundle id for native apps, services id
    ///     for the web), the leeway and the clock.
    public init(keys: AppleKeySet, policy: VerificationPolicy) {
        base = AppleTokenVerifier(keys: keys, policy: policy)
    }

    /// Whether `clientID` is one of the policy's client ids: a code-only
    /// sign-in names its client, checked before Apple is asked.
    public func accepts(audience clientID: String) -> Bool { base.policy.audiences.contains(clientID) }

    /// Verifies one identity token.
    ///
    /// - Parameters:
    ///   - token: the `id_token` as the client received it (three base64url parts).
    ///   - expectedNonce: the nonce the client sent to Apple (as Apple echoes
    ///     it: on iOS that is the SHA-256 hex the app passed in). When given,
    ///     the token must carry exactly this nonce, or none and say
    ///     `nonce_supported: false`. Give it whenever your client sends one:
    ///     it is what stops a stolen token from being replayed.
    /// - Returns: the verified token and its claims.
    /// - Throws: ``VerificationFailure`` when the token is not acceptable
    ///   (answer 4xx; its ``VerificationFailure/reason`` is a stable code), or
    ///   ``AppleKeysUnavailable`` when Apple's keys cannot be had right now
    ///   (answer 503: the token may be fine).
    public func verify(_ token: String, expectedNonce: String? = nil) async throws -> VerifiedIdentityToken {
        let (verified, decoded) = try await base.verify(token, alsoDecoding: AppleIdentityToken.self)
        guard let sub = verified.claims.sub, !sub.isEmpty else { throw VerificationFailure.missingSubject }
        let claims: AppleIdentityToken
        do { claims = try decoded.get() } catch {
            throw VerificationFailure.malformedIdentityClaims(AppleTokenVerifier.describe(error))
        }
        if let expectedNonce {
            switch claims.nonce {
            case expectedNonce?: break
            case nil:
                // Apple's rule: a device that cannot carry a nonce says so
                // with nonce_supported false; any other token without the
                // nonce asked for is refused.
                guard claims.nonceSupported == false else { throw VerificationFailure.nonceMissing }
            case _?: throw VerificationFailure.nonceMismatch
            }
        }
        return VerifiedIdentityToken(
            audience: verified.audience, issuedAt: verified.issuedAt, expiresAt: verified.expiresAt,
            claims: claims, claimsJSON: verified.payload
        )
    }
}
