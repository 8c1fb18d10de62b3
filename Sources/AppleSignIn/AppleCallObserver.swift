/// Apple's endpoints siwa calls, as metrics and spans name them.
public enum AppleEndpoint: String, Sendable, CaseIterable {
    case token
    case revoke
    case keys
    case userMigrationInfo = "usermigrationinfo"

    /// The endpoint a path of `https://appleid.apple.com` is.
    init?(path: String) {
        switch path {
        case "/auth/token": self = .token
        case "/auth/revoke": self = .revoke
        case "/auth/keys": self = .keys
        case "/auth/usermigrationinfo": self = .userMigrationInfo
        default: return nil
        }
    }
}

/// How one call to Apple ended.
public enum AppleCallOutcome: String, Sendable, CaseIterable {
    /// A 200 with a usable body.
    case ok
    /// Apple refused the grant (a code, a refresh token): the user's, not siwa's.
    case invalidGrant = "invalid_grant"
    /// Apple refused siwa's own credentials (team, key, client id).
    case invalidClient = "invalid_client"
    /// Another final refusal (a 4xx, or a 200 the key set cannot use).
    case rejected
    /// No answer to act on: a 429 or 5xx, a timeout, no connection.
    case unavailable

    init(_ kind: AppleAnswer.Kind) {
        switch kind {
        case .ok: self = .ok
        case .invalidGrant: self = .invalidGrant
        case .invalidClient: self = .invalidClient
        case .rejected: self = .rejected
        case .unavailable: self = .unavailable
        }
    }
}

/// Told of every call `AppleAuthClient` and `HTTPJWKSSource` make to
/// Apple, around the call: a caller that counts, times or traces them
/// gives one (siwa's domain layer does); the library itself logs and
/// measures nothing. `call` runs exactly once, inside `observe`, and
/// returns its result with how it ended.
public protocol AppleCallObserver: Sendable {
    func observe<Result: Sendable>(_ endpoint: AppleEndpoint, _ call: () async -> (Result, AppleCallOutcome)) async -> Result
}

extension Optional where Wrapped == any AppleCallObserver {
    /// The call, observed when there is an observer.
    func observe<Result: Sendable>(_ endpoint: AppleEndpoint, _ call: () async -> (Result, AppleCallOutcome)) async -> Result {
        guard let observer = self else { return await call().0 }
        return await observer.observe(endpoint, call)
    }
}
