import Crypto
import Foundation
import Hummingbird
import Logging
import NIOCore

/// How `/auth/token` or `/auth/revoke` misbehaves, for failure tests.
public enum SimulatedEndpointBehaviour: Sendable, Equatable {
    /// Answer as Apple does.
    case normal
    /// Answer this status with `{"error": error}` (or no body), and a
    /// `Retry-After` header when given; the request is not processed.
    case status(Int, error: String? = nil, retryAfter: String? = nil)
    /// Read the request and send nothing while the behaviour stays `.stall`
    /// (set another to release the stalled requests; their late answers go
    /// to connections the clients have closed), two minutes at most.
    case stall
    /// Close the connection without an answer.
    case closeConnection
    /// Do what was asked (revoke the token), then send nothing, as `.stall`:
    /// the answer is lost after Apple acted (`/auth/revoke` only).
    case stallAfterProcessing
}

/// How the simulator's identity tokens carry `is_private_email` for a
/// relay address when no flag was asked for. Apple's genuine tokens do both:
/// some omit it for a `@privaterelay.appleid.com` address.
public enum PrivateEmailClaim: Sendable, Equatable {
    case always
    /// Every second such token omits it (the default).
    case sometimes
    case never
}

/// The request context of the simulator's routes: Hummingbird's basic one
/// plus the channel, so a route can close its connection or notice that
/// the client has gone.
public struct SimulatorRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}

/// What the simulated `/auth/token` and `/auth/revoke` know and have seen.
struct TokenEndpointState {
    /// A team's Sign in with Apple key, as registered at Apple.
    struct RegisteredKey {
        let teamID: String
        let publicKey: P256.Signing.PublicKey
    }

    /// The user and app a code (and then its tokens) were issued for.
    struct Grant {
        let sub: String
        let clientID: String
        let email: String?
        let isPrivateEmail: Bool?
        let realUserStatus: Int?
        /// The `sub` the id_token carries, when a test wants it to differ.
        let idTokenSub: String?
        /// The `aud` the id_token carries, when a test wants it to differ.
        var idTokenAudience: String? = nil
        /// The `transfer_sub` the id_token carries (a user of a transferred
        /// app, within the 60 days).
        var transferSub: String? = nil
    }

    struct IssuedCode {
        let grant: Grant
        let nonce: String?
        let redirectURI: String?
        var issuedAt: Date
        /// The exchange's id_token, when signed at issue (`presignIDToken`).
        var idToken: String? = nil
        var used = false
    }

    struct RefreshToken {
        let grant: Grant
        var revoked = false
        /// When a refresh last succeeded (the token clock), for the strict
        /// once-a-day check.
        var lastRefreshedAt: Date?
    }

    struct AuthorizedPair: Hashable {
        let sub: String
        let clientID: String
    }

    /// Whether the next token with a relay address (and no flag asked
    /// for) carries `is_private_email`.
    mutating func sendsPrivateEmailClaim() -> Bool {
        switch privateEmailClaim {
        case .always: return true
        case .never: return false
        case .sometimes:
            relayTokensSigned += 1
            return relayTokensSigned % 2 == 1
        }
    }

    /// Apple's codes live five minutes.
    static let codeLifetime: TimeInterval = 300
    /// Apple's limit on a client secret's `exp - iat`: six months.
    static let maximumSecretLifetime: TimeInterval = 15_777_000

    var keys: [String: RegisteredKey] = [:]
    /// The team that owns each client id assigned one (`assignClient`): a
    /// secret of another team's key is refused for it, as Apple does. A
    /// client id not assigned is taken with any registered team's secret.
    var clientTeams: [String: String] = [:]
    var verifiedSecrets: [String: ClientSecretCheck.Verified] = [:]
    var codes: [String: IssuedCode] = [:]
    var refreshTokens: [String: RefreshToken] = [:]
    /// Access token to the refresh token issued with it.
    var accessTokens: [String: String] = [:]

    var tokenBehaviour = SimulatedEndpointBehaviour.normal
    var revokeBehaviour = SimulatedEndpointBehaviour.normal
    var tokenRequests = 0
    var revokeRequests = 0
    var refreshRequests: [String: Int] = [:]
    /// When each `grant_type=refresh_token` request arrived, in order.
    var refreshRequestTimes: [ContinuousClock.Instant] = []
    var revokedTokens: [String] = []
    var lastTokenForm: [String: String]?
    var lastRevokeForm: [String: String]?

    /// The (sub, client id) pairs the user has authorized and not revoked:
    /// Apple's first authorization (names, `real_user_status`) happens once.
    var authorized: Set<AuthorizedPair> = []
    /// How identity tokens carry `is_private_email`, and how many relay
    /// addresses were signed for (`.sometimes` drops it from every second).
    var privateEmailClaim = PrivateEmailClaim.sometimes
    var relayTokensSigned = 0
    /// Refuse a refresh of a token refreshed less than a day before.
    var strictRefresh = false
    var notificationEndpoint: URL?
    /// App transfers (SimulatedUserMigration.swift).
    var migration = UserMigrationState()
    var now: @Sendable () -> Date = { Date() }
    var logger = Logger(label: "apple-simulator")
}
