import Foundation
import Synchronization

/// Hands out Apple client secrets, one per client id, signed once and reused
/// until close to their expiry: signing per request would be wasted work,
/// and a secret minted at every call makes Apple's logs useless.
///
/// A secret is renewed once `renewalMargin` or less of its lifetime remains
/// (a quarter of the lifetime, at least 5 minutes, at most half of it), so
/// a request never leaves with a secret about to expire in flight, and when
/// the clock reads earlier than the secret's `iat` (the clock was set back).
public final class ClientSecretProvider: Sendable {
    private struct Cached {
        let secret: String
        let issuedAt: Date
        let renewAt: Date
    }

    public let key: AppleClientSecretKey
    public let lifetime: Duration
    public let renewalMargin: Duration
    private let now: @Sendable () -> Date
    private let cache = Mutex<[String: Cached]>([:])

    /// - Parameters:
    ///   - lifetime: `exp - iat` of each secret: whole seconds from 60 to
    ///     15,777,000 (Apple's six months); an hour by default.
    ///   - now: the clock (tests move it).
    public init(key: AppleClientSecretKey, lifetime: Duration = AppleClientSecret.defaultLifetime,
                now: @escaping @Sendable () -> Date = { Date() }) throws(AppleClientSecretError) {
        try AppleClientSecret.checkLifetime(lifetime)
        self.key = key
        self.lifetime = lifetime
        self.renewalMargin = min(max(lifetime / 4, .seconds(300)), lifetime / 2)
        self.now = now
    }

    /// The secret for `clientID`: the cached one, or a new one when it is
    /// due for renewal. Signing happens under the lock, so concurrent
    /// callers get one secret, not one each.
    public func secret(for clientID: String) throws(AppleClientSecretError) -> String {
        let now = self.now()
        return try cache.withLock { cache throws(AppleClientSecretError) -> String in
            if let cached = cache[clientID], now >= cached.issuedAt, now < cached.renewAt { return cached.secret }
            let secret = try AppleClientSecret.make(key: key, clientID: clientID, issuedAt: now, lifetime: lifetime)
            let issuedAt = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
            let remaining = Double((lifetime - renewalMargin).components.seconds)
            cache[clientID] = Cached(secret: secret, issuedAt: issuedAt, renewAt: issuedAt.addingTimeInterval(remaining))
            return secret
        }
    }
}
