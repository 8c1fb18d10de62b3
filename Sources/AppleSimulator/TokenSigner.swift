import Foundation

/// Builds compact JWS tokens the way Apple does, and, for hostile tests, the
/// ways an attacker would.
public struct TokenSigner: Sendable {
    public init() {}

    /// `header.payload.signature` with `key`'s RS256 signature; `kid` comes
    /// from `header` (add it there).
    public func sign(header: [String: any Sendable], claims: [String: any Sendable], key: SimulatedKey) throws -> String {
        let input = try signingInput(header: header, claims: claims)
        return input + "." + Base64URLEncoding.encode(try key.sign(Data(input.utf8)))
    }

    /// `base64url(header) "." base64url(claims)`. Any JSON value may sit in
    /// the header (`crit` lists, say), for hostile tests.
    public func signingInput(header: [String: any Sendable], claims: [String: any Sendable]) throws -> String {
        let h = try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])
        return try signingInput(rawHeader: h, claims: claims)
    }

    /// A token whose header is exactly `rawHeader`, bytes that need not be
    /// JSON or even UTF-8 (an `alg` with a raw 0xFF byte, a lone surrogate
    /// escape), signed with `key` all the same.
    public func sign(rawHeader: Data, claims: [String: any Sendable], key: SimulatedKey) throws -> String {
        let input = try signingInput(rawHeader: rawHeader, claims: claims)
        return input + "." + Base64URLEncoding.encode(try key.sign(Data(input.utf8)))
    }

    public func signingInput(rawHeader: Data, claims: [String: any Sendable]) throws -> String {
        let c = try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys])
        return Base64URLEncoding.encode(rawHeader) + "." + Base64URLEncoding.encode(c)
    }

    /// The claims of a server-to-server notification, as Apple sends them:
    /// `events` is a JSON *string*, `event_time` in milliseconds, exp = iat + 1 day.
    public static func notificationClaims(
        type: String, sub: String, audience: String, jti: String = UUID().uuidString,
        issuedAt: Date = Date(), eventTime: Date? = nil, email: String? = nil, isPrivateEmail: Bool? = nil
    ) -> [String: any Sendable] {
        var event: [String: any Sendable] = [
            "type": type, "sub": sub,
            "event_time": Int64(((eventTime ?? issuedAt).timeIntervalSince1970 * 1000).rounded()),
        ]
        if let email { event["email"] = email }
        if let isPrivateEmail { event["is_private_email"] = isPrivateEmail ? "true" : "false" }
        let eventsJSON = (try? JSONSerialization.data(withJSONObject: event, options: [.sortedKeys])) ?? Data()
        let iat = Int64(issuedAt.timeIntervalSince1970)
        return [
            "iss": "https://appleid.apple.com", "aud": audience, "iat": iat, "exp": iat + 86400,
            "jti": jti, "events": String(decoding: eventsJSON, as: UTF8.self),
        ]
    }

    /// The claims of an identity token (current shape: JSON booleans).
    /// `is_private_email` follows the email's domain unless `isPrivateEmail`
    /// says; `omitsPrivateEmail` leaves it out, as some of Apple's tokens do.
    public static func identityClaims(
        sub: String, audience: String, issuedAt: Date = Date(), email: String? = nil,
        nonce: String? = nil, realUserStatus: Int? = 2, isPrivateEmail: Bool? = nil, omitsPrivateEmail: Bool = false,
        transferSub: String? = nil
    ) -> [String: any Sendable] {
        let iat = Int64(issuedAt.timeIntervalSince1970)
        var claims: [String: any Sendable] = [
            "iss": "https://appleid.apple.com", "aud": audience, "iat": iat, "exp": iat + 86400,
            "sub": sub, "auth_time": iat, "c_hash": "simulated",
        ]
        if let email {
            claims["email"] = email
            claims["email_verified"] = true
            if !omitsPrivateEmail { claims["is_private_email"] = isPrivateEmail ?? email.hasSuffix("privaterelay.appleid.com") }
        }
        if let nonce {
            claims["nonce"] = nonce
            claims["nonce_supported"] = true
        }
        if let realUserStatus { claims["real_user_status"] = realUserStatus }
        if let transferSub { claims["transfer_sub"] = transferSub }
        return claims
    }
}
