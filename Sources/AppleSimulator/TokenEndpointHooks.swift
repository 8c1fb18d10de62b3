import Crypto
import Foundation

/// What tests, the demo and the bench set up and observe on the simulated
/// `/auth/token` and `/auth/revoke`.
extension AppleSimulator {
    // MARK: Set-up

    /// Registers a team's Sign in with Apple key (the public half of its
    /// `.p8`): client secrets signed with it, `kid` = `keyID` and `iss` =
    /// `teamID`, are accepted for any client id.
    public func registerClient(teamID: String, keyID: String, publicKey: P256.Signing.PublicKey) {
        tokenState.withLock { $0.keys[keyID] = .init(teamID: teamID, publicKey: publicKey) }
    }

    /// `clientID` (an app's bundle id, a website's Services ID) belongs to
    /// `teamID`: Apple then takes only that team's client secrets for it
    /// (`invalid_client` for another team's), as for clients of several
    /// teams on one siwa.
    public func assignClient(_ clientID: String, toTeam teamID: String) {
        tokenState.withLock { $0.clientTeams[clientID] = teamID }
    }

    /// The same, from the public key's PEM (`BEGIN PUBLIC KEY`).
    public func registerClient(teamID: String, keyID: String, publicKeyPEM: String) throws {
        registerClient(teamID: teamID, keyID: keyID, publicKey: try P256.Signing.PublicKey(pemRepresentation: publicKeyPEM))
    }

    /// A new authorization code for `sub` at `clientID`, as the app gets at
    /// sign-in: single-use, valid five minutes, bound to the client (and to
    /// `redirectURI` when given: Apple's web flow). `idTokenSub` and
    /// `idTokenAudience` make the id_token carry another `sub` or `aud`
    /// (Apple misbehaving, for tests).
    /// - Parameter presignIDToken: sign the `id_token` the exchange will
    ///   return now, not when the code is exchanged (its `iat` is then the
    ///   code's issue time, within Apple's five minutes). For the benchmark:
    ///   the RSA signature is Apple's work, and made during the timed run it
    ///   took the CPU that siwa, whose cost is measured, shares with the
    ///   simulator on the same machine.
    public func issueAuthorizationCode(
        sub: String, clientID: String, email: String? = nil, isPrivateEmail: Bool? = nil, nonce: String? = nil,
        realUserStatus: Int? = 2, idTokenSub: String? = nil, idTokenAudience: String? = nil, redirectURI: String? = nil,
        presignIDToken: Bool = false
    ) -> String {
        // As Apple: real_user_status on a native app's first authorization only.
        let first = authorizeOnce(sub: sub, clientID: clientID)
        let grant = TokenEndpointState.Grant(sub: sub, clientID: clientID, email: email, isPrivateEmail: isPrivateEmail,
                                             realUserStatus: first && redirectURI == nil ? realUserStatus : nil,
                                             idTokenSub: idTokenSub, idTokenAudience: idTokenAudience)
        return issueCode(grant, nonce: nonce, redirectURI: redirectURI, presignIDToken: presignIDToken)
    }

    /// Records that the user authorized the app; true the first time (and
    /// the first time after a revocation).
    func authorizeOnce(sub: String, clientID: String) -> Bool {
        tokenState.withLock { $0.authorized.insert(.init(sub: sub, clientID: clientID)).inserted }
    }

    func issueCode(_ grant: TokenEndpointState.Grant, nonce: String?, redirectURI: String?, presignIDToken: Bool = false) -> String {
        let code = Self.randomToken(prefix: "c")
        let issuedAt = tokenState.withLock { $0.now() }
        // Unsigned now (it cannot fail with the simulator's own key): signed at the exchange.
        let idToken = presignIDToken ? try? signIDToken(grant, nonce: nonce, issuedAt: issuedAt) : nil
        tokenState.withLock { state in
            state.codes[code] = .init(grant: grant, nonce: nonce, redirectURI: redirectURI, issuedAt: issuedAt, idToken: idToken)
        }
        return code
    }

    /// Makes `code` older than its five minutes.
    public func expireCode(_ code: String) {
        tokenState.withLock { $0.codes[code]?.issuedAt -= TokenEndpointState.codeLifetime + 1 }
    }

    /// The clock of the token endpoints (code lifetimes, client secrets' `iat`/`exp`).
    public func setTokenClock(_ now: @escaping @Sendable () -> Date) { tokenState.withLock { $0.now = now } }

    /// Where `consent-revoked` notifications go after a revocation (nil: nowhere).
    public func setNotificationEndpoint(_ url: URL?) { tokenState.withLock { $0.notificationEndpoint = url } }

    public func setTokenEndpointBehaviour(_ behaviour: SimulatedEndpointBehaviour) {
        tokenState.withLock { $0.tokenBehaviour = behaviour }
    }

    public func setRevokeEndpointBehaviour(_ behaviour: SimulatedEndpointBehaviour) {
        tokenState.withLock { $0.revokeBehaviour = behaviour }
    }

    /// The user revokes the app at appleid.apple.com: the refresh token dies,
    /// and the next sign-in is a first authorization again. (Apple sends a
    /// notification then too; this sends none, so a test can tell the two
    /// paths apart.)
    public func revokeRefreshToken(_ token: String) {
        tokenState.withLock { state in
            guard let grant = state.refreshTokens[token]?.grant else { return }
            state.refreshTokens[token]?.revoked = true
            state.authorized.remove(.init(sub: grant.sub, clientID: grant.clientID))
        }
    }

    /// How identity tokens carry `is_private_email` for a relay address
    /// (`.sometimes`, the default: every second one omits it, as some of
    /// Apple's genuine tokens do).
    public func setPrivateEmailClaim(_ claim: PrivateEmailClaim) { tokenState.withLock { $0.privateEmailClaim = claim } }

    /// Strict: a refresh of a token refreshed less than a day before (on
    /// the token clock) is answered `invalid_grant`, where Apple's
    /// documents say it "may throttle your call if you attempt to verify a
    /// user's Apple Account more than once a day". Off by default.
    public func setStrictRefresh(_ strict: Bool) { tokenState.withLock { $0.strictRefresh = strict } }

    // MARK: Observations

    /// Requests to `/auth/token`, answered or not.
    public var tokenRequests: Int { tokenState.withLock { $0.tokenRequests } }
    /// Requests to `/auth/revoke`, answered or not.
    public var revokeRequests: Int { tokenState.withLock { $0.revokeRequests } }
    /// `grant_type=refresh_token` requests that named `token`.
    public func refreshRequests(for token: String) -> Int { tokenState.withLock { $0.refreshRequests[token] ?? 0 } }
    /// When each `grant_type=refresh_token` request arrived (its form
    /// read), in order: the rate of validation calls.
    public var refreshRequestTimes: [ContinuousClock.Instant] { tokenState.withLock { $0.refreshRequestTimes } }
    /// Tokens given to `/auth/revoke` by authenticated clients, in order.
    public var revokedTokens: [String] { tokenState.withLock { $0.revokedTokens } }

    /// Every refresh token issued so far (live or not), in no order.
    public var issuedRefreshTokens: [String] { tokenState.withLock { Array($0.refreshTokens.keys) } }
    /// Every access token issued so far, in no order.
    public var issuedAccessTokens: [String] { tokenState.withLock { Array($0.accessTokens.keys) } }
    /// The last form `/auth/token` received, decoded (nil if unreadable).
    public var lastTokenForm: [String: String]? { tokenState.withLock { $0.lastTokenForm } }
    /// The last form `/auth/revoke` received, decoded (nil if unreadable).
    public var lastRevokeForm: [String: String]? { tokenState.withLock { $0.lastRevokeForm } }

    /// Whether `token` is a refresh token issued here and not revoked.
    public func isRefreshTokenLive(_ token: String) -> Bool {
        tokenState.withLock { $0.refreshTokens[token].map { !$0.revoked } ?? false }
    }
}
