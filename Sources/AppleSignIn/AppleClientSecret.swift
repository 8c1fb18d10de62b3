import Crypto
import Foundation

/// The `client_secret` of Apple's `/auth/token` and `/auth/revoke`: an ES256
/// JWT signed with the team's `.p8` key. Header `{"alg":"ES256","kid":KEY_ID}`
/// (Apple's documentation names no `typ`, so none is sent); claims `iss` =
/// team id, `iat`, `exp`, `aud` = `https://appleid.apple.com`, `sub` = the
/// client id; the signature is the raw R‖S pair (64 bytes), as JOSE has it,
/// not DER.
public enum AppleClientSecret {
    public static let audience = "https://appleid.apple.com"
    /// Apple refuses secrets that live longer than six months.
    public static let maximumLifetime: Duration = .seconds(15_777_000)
    public static let defaultLifetime: Duration = .seconds(3600)

    struct Header: Encodable {
        let alg = "ES256"
        let kid: String
    }

    struct Claims: Encodable {
        let iss: String
        let iat: Int64
        let exp: Int64
        let aud: String
        let sub: String
    }

    /// A secret issued at `issuedAt` (whole seconds, rounded down) that
    /// expires `lifetime` later.
    public static func make(key: AppleClientSecretKey, clientID: String, issuedAt: Date,
                            lifetime: Duration = defaultLifetime) throws(AppleClientSecretError) -> String {
        try checkLifetime(lifetime)
        let iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        let claims = Claims(iss: key.teamID, iat: iat, exp: iat + lifetime.components.seconds, aud: audience, sub: clientID)
        do {
            // Sorted keys give the exact header Apple's samples show: alg, then kid.
            return try ES256JWS.sign(header: Header(kid: key.keyID), claims: claims, with: key.privateKey)
        } catch {
            throw AppleClientSecretError("could not sign the client secret for \(clientID) with key \(key.keyID)")
        }
    }

    /// Whole seconds, from a minute to Apple's six months.
    static func checkLifetime(_ lifetime: Duration) throws(AppleClientSecretError) {
        guard lifetime >= .seconds(60), lifetime <= maximumLifetime, lifetime.components.attoseconds == 0 else {
            throw AppleClientSecretError("client secret lifetime \(lifetime) is not whole seconds from 60 to \(maximumLifetime.components.seconds)")
        }
    }
}
