import Foundation
import Synchronization

/// Hands out Apple client secrets, one per client id (signed with its
/// team's key), signed once and reused
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

    /// Per client id, the key of its team; `anyClient` for any other.
    public let keys: [String: AppleClientSecretKey]
    public let anyClient: AppleClientSecretKey?
    public let lifetime: Duration
    public let renewalMargin: Duration
    private let now: @Sendable () -> Date
    private let cache = Mutex<[String: Cached]>([:])

    /// - Parameters:
    ///   - lifetime: `exp - iat` of each secret: whole seconds from 60 to
    ///     15,777,000 (Apple's six months); an hour by default.
    ///   - now: the clock (tests move it).
    public convenience init(key: AppleClientSecretKey, lifetime: Duration = AppleClientSecret.defaultLifetime,
                            now: @escaping @Sendable () -> Date = { Date() }) throws(AppleClientSecretError) {
        try self.init(keys: [:], anyClient: key, lifetime: lifetime, now: now)
    }

    /// - Parameters:
    ///   - keys: each client id's key (several teams: each client's team's).
    ///   - anyClient: the key for a client id `keys` does not name (one
    ///     team: its key signs for any of its clients); nil: such a client
    ///     has no secret.
    public init(keys: [String: AppleClientSecretKey], anyClient: AppleClientSecretKey?,
                lifetime: Duration = AppleClientSecret.defaultLifetime,
                now: @escaping @Sendable () -> Date = { Date() }) throws(AppleClientSecretError) {
        try AppleClientSecret.checkLifetime(lifetime)
        self.keys = keys
        self.anyClient = anyClient
        self.lifetime = lifetime
        self.renewalMargin = min(max(lifetime / 4, .seconds(300)), lifetime / 2)
        self.now = now
    }

    /// The secret for `clientID`: the cached one, or a new one when it is
    /// due for renewal. Signing happens under the lock, so concurrent
    /// callers get one secret, not one each.
    public func secret(for clientID: String) throws(AppleClientSecretError) -> String {
        guard let key = keys[clientID] ?? anyClient else {
            throw AppleClientSecretError("no Sign in with Apple key is configured for client \(clientID.prefix(255))")
        }
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
