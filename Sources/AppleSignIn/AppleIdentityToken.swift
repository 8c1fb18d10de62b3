import Foundation

/// Apple's `real_user_status`: how confident Apple is that the user is a real person.
public enum RealUserStatus: Int, Sendable, Codable {
    case unsupported = 0
    case unknown = 1
    case likelyReal = 2
}

/// An identity token (the `id_token` a client gets at sign-in) whose
/// signature and claims were verified.
public struct AppleIdentityToken: Sendable, Decodable {
    public let sub: String
    public let email: String?
    public let emailVerified: Bool?
    public let isPrivateEmail: Bool?
    public let nonce: String?
    public let nonceSupported: Bool?
    public let realUserStatus: RealUserStatus?
    public let authTime: Double?
    public let cHash: String?
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
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        sub = try c.decode(String.self, forKey: .sub)
        email = try c.decodeIfPresent(String.self, forKey: .email)
        emailVerified = try c.decodeIfPresent(FlexibleBool.self, forKey: .emailVerified)?.value
        isPrivateEmail = try c.decodeIfPresent(FlexibleBool.self, forKey: .isPrivateEmail)?.value
        nonce = try c.decodeIfPresent(String.self, forKey: .nonce)
        nonceSupported = try c.decodeIfPresent(FlexibleBool.self, forKey: .nonceSupported)?.value
        realUserStatus = try c.decodeIfPresent(RealUserStatus.self, forKey: .realUserStatus)
        authTime = try c.decodeIfPresent(Double.self, forKey: .authTime)
        cHash = try c.decodeIfPresent(String.self, forKey: .cHash)
        atHash = try c.decodeIfPresent(String.self, forKey: .atHash)
    }
}

public struct VerifiedIdentityToken: Sendable {
    public let audience: String
    public let issuedAt: Date
    public let expiresAt: Date
    public let claims: AppleIdentityToken
    /// The verified claims as Apple sent them.
    public let claimsJSON: Data
}

/// Verifies identity tokens presented at sign-in.
public struct IdentityTokenVerifier: Sendable {
    let base: AppleTokenVerifier

    public init(keys: AppleKeySet, policy: VerificationPolicy) {
        base = AppleTokenVerifier(keys: keys, policy: policy)
    }

    /// - Parameter expectedNonce: the nonce the client sent to Apple (as
    ///   Apple echoes it: on iOS that is the SHA-256 hex the app passed in).
    ///   When given, the token must carry exactly this nonce, or none and
    ///   say `nonce_supported: false`.
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
