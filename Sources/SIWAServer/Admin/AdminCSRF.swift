import AccountStore
import Crypto
import Foundation

/// CSRF tokens for the page's forms. A browser sends Basic credentials on
/// its own with every request to the origin, a form POST from another site
/// too: so a POST authenticated by Basic must carry a token that only the
/// page served to that key could hold.
///
/// A token is `TIME.MAC`: the Unix time it was made and an HMAC-SHA256,
/// under a key drawn at start (each process its own: a restart invalidates
/// open pages, which then need a reload), of the API key's id and that
/// time. It is good for `lifetime`, for that key only. No cookie is set
/// (so SameSite has nothing to apply to); the POST handler also refuses a
/// request the browser marks cross-site (`Sec-Fetch-Site`) or whose
/// `Origin` is not the listener's own.
public struct CSRFTokens: Sendable {
    private let secret = SymmetricKey(size: .bits256)
    let lifetime: TimeInterval

    public init(lifetime: TimeInterval = 12 * 3600) {
        self.lifetime = lifetime
    }

    public func token(for key: APIKeyIdentity, at now: Date = Date()) -> String {
        let time = Int64(now.timeIntervalSince1970)
        return "\(time).\(mac(key: key, time: time))"
    }

    public func isValid(_ token: String, for key: APIKeyIdentity, at now: Date = Date()) -> Bool {
        let parts = token.split(separator: ".", maxSplits: 1)
        guard parts.count == 2, let time = Int64(parts[0]) else { return false }
        let age = now.timeIntervalSince1970 - TimeInterval(time)
        guard age >= -60, age <= lifetime else { return false }
        let expected = Array(mac(key: key, time: time).utf8), given = Array(parts[1].utf8)
        guard expected.count == given.count else { return false }
        return zip(expected, given).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private func mac(key: APIKeyIdentity, time: Int64) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Data("\(key.id)|\(time)".utf8), using: secret)
        return code.hexLowercased
    }
}
