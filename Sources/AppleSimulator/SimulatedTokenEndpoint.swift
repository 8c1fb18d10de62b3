import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// `POST /auth/token` and `POST /auth/revoke`, answering as Apple does:
/// form bodies only, the client secret checked (ClientSecretCheck), codes
/// single-use for five minutes and bound to their client, refresh tokens
/// live until revoked, errors as 400 `{"error": "<code>"}`. Revoking a live
/// token kills its grant and, as Apple does, sends a `consent-revoked`
/// notification to the endpoint set with `setNotificationEndpoint`.
extension AppleSimulator {
    static let maximumFormBytes = 64 * 1024

    func addTokenRoutes(to router: Router<SimulatorRequestContext>) {
        router.post("/auth/token") { request, context in try await self.answerToken(request, context: context) }
        router.post("/auth/revoke") { request, context in try await self.answerRevoke(request, context: context) }
        router.post("/auth/usermigrationinfo") { request, context in try await self.answerUserMigration(request, context: context) }
    }

    private enum TokenDecision {
        case refuse(String)
        case issue(TokenEndpointState.Grant, nonce: String?, refreshToken: String?, accessToken: String, now: Date, idToken: String?)
        case migrationToken(String)
    }

    private func answerToken(_ request: Request, context: SimulatorRequestContext) async throws -> Response {
        let (form, isForm) = await Self.readForm(request)
        let behaviour = tokenState.withLock { state in
            state.tokenRequests += 1
            state.lastTokenForm = form
            if form?["grant_type"] == "refresh_token", let token = form?["refresh_token"] {
                state.refreshRequests[token, default: 0] += 1
                state.refreshRequestTimes.append(.now)
            }
            return state.tokenBehaviour
        }
        let stalling = { @Sendable in self.tokenState.withLock { $0.tokenBehaviour == behaviour } }
        if let response = await Self.misbehave(behaviour, context: context, stalling: stalling) { return response }
        guard isForm, let form else { return Self.error("invalid_request") }
        let decision = tokenState.withLock { state -> TokenDecision in
            let now = state.now()
            guard let clientID = form["client_id"], let secret = form["client_secret"],
                  let team = ClientSecretCheck.team(of: secret, clientID: clientID, state: &state) else { return .refuse("invalid_client") }
            switch form["grant_type"] {
            case "client_credentials":
                // An app transfer's access token, for the whole team (TN3159).
                guard form["scope"] == "user.migration" else { return .refuse("invalid_request") }
                return .migrationToken(state.migration.issueToken(team: team, clientID: clientID, now: now))
            case "authorization_code":
                guard let code = form["code"] else { return .refuse("invalid_request") }
                // Unknown, used, expired, another client's, or another redirect_uri: all
                // invalid_grant. A code issued with a redirect_uri (the web flow) is
                // exchanged only with that one; Apple's native codes have none.
                guard let issued = state.codes[code], !issued.used,
                      now.timeIntervalSince(issued.issuedAt) < TokenEndpointState.codeLifetime,
                      issued.grant.clientID == clientID, issued.redirectURI == nil || issued.redirectURI == form["redirect_uri"]
                else { return .refuse("invalid_grant") }
                state.codes[code]?.used = true
                let (refresh, access) = (Self.randomToken(prefix: "r"), Self.randomToken(prefix: "a"))
                state.refreshTokens[refresh] = .init(grant: issued.grant)
                state.accessTokens[access] = refresh
                return .issue(issued.grant, nonce: issued.nonce, refreshToken: refresh, accessToken: access, now: now,
                              idToken: issued.idToken)
            case "refresh_token":
                guard let token = form["refresh_token"] else { return .refuse("invalid_request") }
                guard let live = state.refreshTokens[token], !live.revoked, live.grant.clientID == clientID else {
                    return .refuse("invalid_grant")
                }
                // Strict: Apple's once-a-day guidance enforced (the token lives on).
                if state.strictRefresh, let last = live.lastRefreshedAt, now.timeIntervalSince(last) < 86_400 {
                    return .refuse("invalid_grant")
                }
                state.refreshTokens[token]?.lastRefreshedAt = now
                let access = Self.randomToken(prefix: "a")
                state.accessTokens[access] = token
                // As Apple: a new access token and id_token, no new refresh
                // token; real_user_status comes with the first sign-in only.
                let grant = TokenEndpointState.Grant(sub: live.grant.sub, clientID: live.grant.clientID, email: live.grant.email,
                                                     isPrivateEmail: live.grant.isPrivateEmail, realUserStatus: nil,
                                                     idTokenSub: live.grant.idTokenSub)
                return .issue(grant, nonce: nil, refreshToken: nil, accessToken: access, now: now, idToken: nil)
            case nil: return .refuse("invalid_request")
            default: return .refuse("unsupported_grant_type")
            }
        }
        switch decision {
        case .refuse(let code): return Self.error(code)
        case .migrationToken(let token):
            return Self.json(.ok, ["access_token": token, "token_type": "Bearer", "expires_in": UserMigrationState.tokenLifetime])
        case .issue(let grant, let nonce, let refreshToken, let accessToken, let now, let presigned):
            var answer: [String: any Sendable] = [
                "access_token": accessToken, "token_type": "Bearer", "expires_in": 3600,
                "id_token": try presigned ?? signIDToken(grant, nonce: nonce, issuedAt: now),
            ]
            if let refreshToken { answer["refresh_token"] = refreshToken }
            return Self.json(.ok, answer)
        }
    }

    /// The id_token Apple returns with tokens: RS256 with the current key.
    func signIDToken(_ grant: TokenEndpointState.Grant, nonce: String?, issuedAt: Date) throws -> String {
        let claims = TokenSigner.identityClaims(
            sub: grant.idTokenSub ?? grant.sub, audience: grant.idTokenAudience ?? grant.clientID, issuedAt: issuedAt, email: grant.email,
            nonce: nonce, realUserStatus: grant.realUserStatus, isPrivateEmail: grant.isPrivateEmail,
            omitsPrivateEmail: omitsPrivateEmail(email: grant.email, asked: grant.isPrivateEmail), transferSub: grant.transferSub)
        let key = currentKey
        return try signer.sign(header: ["kid": key.kid, "alg": "RS256"], claims: claims, key: key)
    }

    /// Whether a token for `email` leaves `is_private_email` out: only for
    /// a relay address with no flag asked for, as `PrivateEmailClaim` says.
    func omitsPrivateEmail(email: String?, asked: Bool?) -> Bool {
        guard asked == nil, let email, email.lowercased().hasSuffix("@privaterelay.appleid.com") else { return false }
        return tokenState.withLock { !$0.sendsPrivateEmailClaim() }
    }

    private enum RevokeDecision {
        case refuse(String)
        /// Answered 200; when a live grant died, its notification goes here.
        case revoked(TokenEndpointState.Grant?, endpoint: URL?, logger: Logger)
    }

    private func answerRevoke(_ request: Request, context: SimulatorRequestContext) async throws -> Response {
        let (form, isForm) = await Self.readForm(request)
        let behaviour = tokenState.withLock { state in
            state.revokeRequests += 1
            state.lastRevokeForm = form
            return state.revokeBehaviour
        }
        let stalling = { @Sendable in self.tokenState.withLock { $0.revokeBehaviour == behaviour } }
        if behaviour != .stallAfterProcessing, let response = await Self.misbehave(behaviour, context: context, stalling: stalling) {
            return response
        }
        guard isForm, let form else { return Self.error("invalid_request") }
        let decision = tokenState.withLock { state -> RevokeDecision in
            guard let clientID = form["client_id"], let secret = form["client_secret"],
                  ClientSecretCheck.isValid(secret, clientID: clientID, state: &state) else { return .refuse("invalid_client") }
            guard let token = form["token"], !token.isEmpty,
                  let hint = form["token_type_hint"], hint == "refresh_token" || hint == "access_token" else { return .refuse("invalid_request") }
            state.revokedTokens.append(token)
            // Either token revokes the user's authorization; an unknown or
            // dead token, or another client's, is answered 200 all the same.
            guard let refresh = state.refreshTokens[token] != nil ? token : state.accessTokens[token],
                  let live = state.refreshTokens[refresh], !live.revoked, live.grant.clientID == clientID
            else { return .revoked(nil, endpoint: nil, logger: state.logger) }
            state.refreshTokens[refresh]?.revoked = true
            // The next sign-in is a first authorization again (names, real_user_status).
            state.authorized.remove(.init(sub: live.grant.sub, clientID: live.grant.clientID))
            return .revoked(live.grant, endpoint: state.notificationEndpoint, logger: state.logger)
        }
        switch decision {
        case .refuse(let code): return Self.error(code)
        case .revoked(let grant, let endpoint, let logger):
            if let grant, let endpoint {
                // Fire and forget: Apple's answer does not wait for its notification.
                Task { await self.sendConsentRevoked(sub: grant.sub, clientID: grant.clientID, to: endpoint, logger: logger) }
            }
            if behaviour == .stallAfterProcessing {
                return await Self.misbehave(.stall, context: context, stalling: stalling) ?? Response(status: .ok)
            }
            return Response(status: .ok)
        }
    }

    private func sendConsentRevoked(sub: String, clientID: String, to endpoint: URL, logger: Logger) async {
        do {
            let token = try notification(type: "consent-revoked", sub: sub, audience: clientID)
            let status = try await NotificationPoster.post(Self.body(for: token), to: endpoint)
            if status != 200 { logger.warning("consent-revoked notification to \(endpoint) answered \(status)") }
        } catch {
            logger.warning("consent-revoked notification to \(endpoint) failed: \(error)")
        }
    }

    // MARK: Pieces

    /// The parsed form (nil when the body is unreadable) and whether the
    /// request said it is a form.
    static func readForm(_ request: Request) async -> ([String: String]?, Bool) {
        let mediaType = request.headers[.contentType]?.split(separator: ";").first?
            .trimmingCharacters(in: .whitespaces).lowercased()
        let body = try? await request.body.collect(upTo: maximumFormBytes)
        return (body.flatMap { FormBody.parse(Data(buffer: $0)) }, mediaType == "application/x-www-form-urlencoded")
    }

    /// The injected failure, or nil to answer normally. A stall lasts while
    /// `stalling()` says so (until the behaviour changes) and the
    /// connection is open, two minutes at most. (A client that gives up
    /// mostly goes unseen: while a request is open the server reads nothing
    /// more from its connection, so it does not see the close.)
    static func misbehave(_ behaviour: SimulatedEndpointBehaviour, context: SimulatorRequestContext,
                                  stalling: @Sendable () -> Bool) async -> Response? {
        switch behaviour {
        case .normal:
            return nil
        case .status(let status, let error, let retryAfter):
            var response = error.map { json(HTTPResponse.Status(code: status), ["error": $0]) } ?? Response(status: .init(code: status))
            if let retryAfter { response.headers[.retryAfter] = retryAfter }
            return response
        case .stall:
            let deadline = ContinuousClock.now + .seconds(120)
            while context.channel.isActive, stalling(), !Task.isCancelled, ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(20))
            }
            return Response(status: .gatewayTimeout)
        case .closeConnection:
            try? await context.channel.close()
            return Response(status: .internalServerError)
        case .stallAfterProcessing:
            return await misbehave(.stall, context: context, stalling: stalling)
        }
    }

    static func error(_ code: String) -> Response { json(.badRequest, ["error": code]) }

    static func json(_ status: HTTPResponse.Status, _ object: [String: any Sendable]) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return Response(status: status, headers: [.contentType: "application/json;charset=UTF-8", .cacheControl: "no-store"],
                        body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// Shaped like Apple's (`c<hex>.0.<letters>.<base64url>`): dots, dashes and underscores
    /// included, so a client's form encoding is exercised.
    static func randomToken(prefix: String) -> String {
        let hex = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let tail = Base64URLEncoding.encode((0..<24).map { _ in UInt8.random(in: 0...255) })
        return prefix + hex + ".0.sim." + tail
    }
}
