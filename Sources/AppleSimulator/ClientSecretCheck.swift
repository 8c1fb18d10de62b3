import Crypto
import Foundation

/// Apple's check of a `client_secret`, with the simulator's own code (not
/// siwa's, which it tests): a compact JWS whose header is exactly
/// `{"alg":"ES256","kid":...}` with a registered key id, whose raw R‖S
/// signature verifies with that key, and whose claims are `iss` = the key's
/// team, `aud` = `https://appleid.apple.com`, `sub` = the form's
/// `client_id`, `iat` not in the future, `exp` in the future and at most six
/// months after `iat`.
enum ClientSecretCheck {
    /// A secret whose signature verified, and what it says: a client reuses
    /// one secret for many calls, so its ES256 check is done once per key
    /// (as a server would cache it), while the rest is checked every time.
    struct Verified {
        let keyID: String
        let publicKey: Data
        let issuer: String?
        let audience: String?
        let subject: String?
        let issuedAt: Double
        let expiresAt: Double
    }

    static func isValid(_ secret: String, clientID: String, state: inout TokenEndpointState) -> Bool {
        team(of: secret, clientID: clientID, state: &state) != nil
    }

    /// The team whose key signed a valid secret (its `iss`); nil when the
    /// secret is not valid, or the client id is another team's. Apple knows
    /// the calling team by it.
    static func team(of secret: String, clientID: String, state: inout TokenEndpointState) -> String? {
        guard let team = team(of: secret, clientID: clientID, keys: state.keys, now: state.now(), cache: &state.verifiedSecrets),
              state.clientTeams[clientID].map({ $0 == team }) ?? true else { return nil }
        return team
    }

    private static func team(of secret: String, clientID: String, keys: [String: TokenEndpointState.RegisteredKey], now: Date,
                             cache: inout [String: Verified]) -> String? {
        let verified: Verified
        if let known = cache[secret], keys[known.keyID]?.publicKey.rawRepresentation == known.publicKey {
            verified = known
        } else {
            guard let checked = verifySignature(secret, keys: keys) else { return nil }
            if cache.count >= 1024 { cache.removeAll() }
            cache[secret] = checked
            verified = checked
        }
        guard let key = keys[verified.keyID], verified.issuer == key.teamID, verified.audience == "https://appleid.apple.com",
              verified.subject == clientID else { return nil }
        let now = now.timeIntervalSince1970
        guard verified.issuedAt <= now && verified.expiresAt > now
            && verified.expiresAt - verified.issuedAt <= TokenEndpointState.maximumSecretLifetime else { return nil }
        return key.teamID
    }

    /// The header's shape and the signature; nil when either is wrong.
    private static func verifySignature(_ secret: String, keys: [String: TokenEndpointState.RegisteredKey]) -> Verified? {
        let segments = secret.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3,
              let headerData = decodeBase64URL(segments[0]), let claimsData = decodeBase64URL(segments[1]),
              let signatureData = decodeBase64URL(segments[2]),
              let header = try? JSONSerialization.jsonObject(with: headerData) as? [String: Any],
              let claims = try? JSONSerialization.jsonObject(with: claimsData) as? [String: Any]
        else { return nil }
        // Exactly alg and kid: the shape Apple documents (no typ).
        guard Set(header.keys) == ["alg", "kid"], header["alg"] as? String == "ES256",
              let kid = header["kid"] as? String, let key = keys[kid] else { return nil }
        // A DER signature (70 bytes or so) is refused here: JOSE wants R‖S.
        guard signatureData.count == 64,
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
              key.publicKey.isValidSignature(signature, for: SHA256.hash(data: Data("\(segments[0]).\(segments[1])".utf8))),
              let iat = (claims["iat"] as? NSNumber)?.doubleValue, let exp = (claims["exp"] as? NSNumber)?.doubleValue
        else { return nil }
        return Verified(keyID: kid, publicKey: key.publicKey.rawRepresentation, issuer: claims["iss"] as? String,
                        audience: claims["aud"] as? String, subject: claims["sub"] as? String, issuedAt: iat, expiresAt: exp)
    }

    /// base64url without padding; anything outside its alphabet is refused.
    static func decodeBase64URL(_ text: Substring) -> Data? {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        guard !text.isEmpty, text.utf8.allSatisfy(alphabet.contains) else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}
