import AccountStore
import AppleSignIn
import Crypto
import Foundation
import Logging
import Metrics

/// `POST /v1/sign-in`: verify the identity token, exchange the
/// authorization code with Apple, store the tokens encrypted, upsert the user.
/// A code-only (web) sign-in exchanges the code first and verifies the
/// identity token of Apple's answer as the app's would be.
public struct SignInService: Sendable {
    /// Apple's refusal of a code (`invalid_grant`), in words that help.
    static let invalidGrantDetail = "Apple refused the authorization code: the code was used, expired, or issued for another client or redirect URI"

    let verifier: IdentityTokenVerifier
    /// Each client's team (a user is a sub in a team) and the web clients.
    public let clients: AppleClients
    let apple: AppleAuthClient
    let keyRing: TokenKeyRing
    let store: SignInStore
    let directory: UserDirectory
    let requires: SignInRequirement
    let logger: Logger
    let appleRejectedClient: Counter
    /// Tokens whose store's outcome was unknown, checked once the database answers.
    let unknownOutcomes: UnknownSignInOutcomes

    public init(verifier: IdentityTokenVerifier, apple: AppleAuthClient, keyRing: TokenKeyRing, store: SignInStore,
                directory: UserDirectory, requires: SignInRequirement = .code, clients: AppleClients,
                unknownOutcomes: UnknownSignInOutcomes? = nil, logger: Logger, metrics: any MetricsFactory) {
        self.verifier = verifier
        self.clients = clients
        self.apple = apple
        self.keyRing = keyRing
        self.store = store
        self.directory = directory
        self.requires = requires
        self.logger = logger
        self.unknownOutcomes = unknownOutcomes ?? UnknownSignInOutcomes(store: store, apple: apple, logger: logger, metrics: metrics)
        appleRejectedClient = Counter(label: "siwa_apple_invalid_client_total", dimensions: [("endpoint", "token")], factory: metrics)
    }

    /// The SHA-256 of a raw nonce, in lower-case hex: what the app puts in
    /// Apple's request, and Apple's token then carries.
    public static func hashedNonce(_ raw: String) -> String {
        SHA256.hash(data: Data(raw.utf8)).hexLowercased
    }

    public func signIn(_ request: SignInAttempt, apiKeyName: String) async -> SignInOutcome {
        do {
            return try await perform(request, apiKeyName: apiKeyName)
        } catch let failure as VerificationFailure {
            return .refused(reason: failure.reason, detail: failure.detail)
        } catch let unavailable as AppleKeysUnavailable {
            return .unavailable(retryAfterSeconds: 5, detail: unavailable.detail)
        } catch {
            logger.warning("Sign-in could not be stored", metadata: ["error": "\(safeDescription(error))"])
            return .unavailable(retryAfterSeconds: 5, detail: "the database is unavailable")
        }
    }

    private func perform(_ request: SignInAttempt, apiKeyName: String) async throws -> SignInOutcome {
        if let nonce = request.nonce, nonce.isEmpty || nonce.utf8.count > 256 {
            return .refused(reason: "malformed_request", detail: "nonce must be 1 to 256 bytes: the raw value the app made")
        }
        if let redirectURI = request.redirectURI, redirectURI.isEmpty || redirectURI.utf8.count > 2048 {
            return .refused(reason: "malformed_request", detail: "redirect_uri must be 1 to 2048 bytes")
        }
        guard let identityToken = request.identityToken else {
            guard let code = request.authorizationCode else {
                return .refused(reason: "identity_token_or_code_required",
                                detail: "send the identity_token Apple handed the app, or (a web client) the authorization_code with client_id and redirect_uri")
            }
            return try await signIn(code: code, request, apiKeyName: apiKeyName)
        }
        switch requires {
        case .code where request.authorizationCode == nil:
            return .refused(reason: "authorization_code_required",
                            detail: "this siwa requires an authorization_code with every sign-in (SIWA_SIGN_IN_REQUIRES=code)")
        case .codeOrNonce where request.authorizationCode == nil && request.nonce == nil:
            return .refused(reason: "authorization_code_or_nonce_required",
                            detail: "this siwa requires an authorization_code or a nonce with every sign-in (SIWA_SIGN_IN_REQUIRES=code_or_nonce)")
        default:
            break
        }
        let verified = try await verifier.verify(identityToken, expectedNonce: request.nonce.map(Self.hashedNonce))
        if let clientID = request.clientID, clientID != verified.audience {
            return .refused(reason: "wrong_aud", detail: "client_id is not the identity token's aud")
        }
        let claims = verified.claims
        guard let team = clients.team(of: verified.audience) else {
            return .refused(reason: "wrong_aud", detail: "the identity token's aud is not one of the configured client ids")
        }
        var record = Self.record(of: verified, team: team, givenName: request.givenName, familyName: request.familyName,
                                 apiKeyName: apiKeyName)

        guard let code = request.authorizationCode else {
            return try await store(record, seal: nil)
        }
        if let refusal = clients.web.refusal(clientID: verified.audience, redirectURI: request.redirectURI) { return refusal }
        let codeHash = Data(SHA256.hash(data: Data(code.utf8)))
        record.codeSHA256 = codeHash
        let prepared = try await store.prepare(appleSub: claims.sub, team: team, codeSHA256: codeHash)
        if let earlier = prepared.replay {
            return try await answer(replaying: earlier, sub: claims.sub, team: team, signedInAt: verified.issuedAt)
        }

        let tokens: AppleTokenResponse
        switch try await exchange(code: code, clientID: verified.audience, redirectURI: request.redirectURI, codeHash: codeHash, replaying: {
            try await answer(replaying: $0, sub: claims.sub, team: team, signedInAt: verified.issuedAt)
        }) {
        case .tokens(let response): tokens = response
        case .answered(let outcome): return outcome
        }
        guard let refreshToken = tokens.refreshToken else {
            return .refused(reason: "token_mismatch", detail: "Apple's answer to the code has no refresh token")
        }
        // From here on, a token siwa does not store is revoked (best effort):
        // Apple would otherwise keep the app authorised for the user.
        let clientID = verified.audience
        // Apple's own id_token must name the same user.
        let sameUser: Bool
        do {
            if let idToken = tokens.idToken { sameUser = try await verifier.verify(idToken).claims.sub == claims.sub } else { sameUser = false }
        } catch {
            revokeUnstored(refreshToken, clientID: clientID)
            throw error
        }
        guard sameUser else {
            revokeUnstored(refreshToken, clientID: clientID)
            return .refused(reason: "token_mismatch", detail: "Apple's id_token for this code is missing or names another user")
        }
        return try await keep(tokens, refreshToken: refreshToken, record: record, prepared: prepared, codeHash: codeHash)
    }

    enum Exchanged {
        case tokens(AppleTokenResponse)
        /// Apple gave no tokens: this is the answer.
        case answered(SignInOutcome)
    }

    /// The code exchanged at Apple's `/auth/token`. `replaying` answers a
    /// code Apple refused that siwa has stored (a retry racing the first).
    func exchange(code: String, clientID: String, redirectURI: String?, codeHash: Data,
                          replaying: (SignInReplay) async throws -> SignInOutcome) async throws -> Exchanged {
        switch await apple.exchange(code: code, clientID: clientID, redirectURI: redirectURI) {
        case .success(let response):
            return .tokens(response)
        case .invalidGrant:
            // A retry racing the first request: the first may have stored
            // the code by now, and its answer is the one to give.
            if let earlier = try await store.replay(codeSHA256: codeHash) { return .answered(try await replaying(earlier)) }
            return .answered(.refused(reason: "invalid_grant", detail: Self.invalidGrantDetail))
        case .invalidClient:
            appleRejectedClient.increment()
            // Apple's ErrorResponse also names "mismatched or invalid redirect URI" under invalid_client.
            logger.error("Apple refused siwa's client credentials (invalid_client): check SIWA_APPLE_TEAM_ID, SIWA_APPLE_KEY_ID, the .p8 key and that the client id belongs to the team\(redirectURI == nil ? "" : "; and that the redirect_uri is a Return URL of the client")",
                         metadata: ["client_id": "\(clientID)"])
            return .answered(.appleRejectedClient)
        case .rejected(let status, let error):
            return .answered(.refused(reason: "invalid_request", detail: "Apple refused the exchange (HTTP \(status)\(error.map { ", \($0)" } ?? ""))"))
        case .unavailable(let retryAfter, let reason):
            logger.warning("Apple's token endpoint is unavailable", metadata: ["reason": "\(reason)"])
            return .answered(.unavailable(retryAfterSeconds: retryAfter.map { max(1, Int($0.components.seconds)) } ?? 5,
                                          detail: "Apple's token endpoint is unavailable"))
        }
    }

    /// Stores the user with Apple's tokens sealed, and answers.
    func keep(_ tokens: AppleTokenResponse, refreshToken: String, record: SignInRecord, prepared: SignInStore.Prepared,
                      codeHash: Data) async throws -> SignInOutcome {
        let clientID = record.clientID
        let outcome: SignInStoreOutcome
        do {
            let keyRing = self.keyRing
            outcome = try await storeOutcome(record, first: prepared) { userID in
                let refresh = try keyRing.seal(refreshToken, userID: userID, clientID: clientID)
                let access = try keyRing.seal(tokens.accessToken, userID: userID, clientID: clientID)
                return SealedTokenPair(keyID: refresh.keyID, refreshToken: refresh.bytes, accessToken: access.bytes,
                                       accessExpiresIn: tokens.expiresIn)
            }
        } catch let notStored as SignInNotStored {
            revokeUnstored(refreshToken, clientID: clientID)
            throw notStored.cause
        } catch {
            // The outcome is unknown (the COMMIT may have landed): a retry of
            // the request gets the stored answer, or Apple's invalid_grant.
            // Once the database answers, a token no row holds is revoked.
            unknownOutcomes.check(refreshToken, clientID: clientID, codeSHA256: codeHash)
            throw error
        }
        if outcome == .deletionInProgress || outcome == .staleIdentityToken { revokeUnstored(refreshToken, clientID: clientID) }
        return answer(outcome, record: record, tokensStored: true)
    }

    /// Stores the sign-in (prepare, then one transaction), again if the
    /// user's row changed in between (a concurrent first sign-in). Throws
    /// `SignInNotStored` when it was certainly not stored (an `again` is
    /// not stored, so a later prepare's failure is certain too).
    private func storeOutcome(_ record: SignInRecord, first: SignInStore.Prepared? = nil,
                              seal: (@Sendable (Int64) throws -> SealedTokenPair)?) async throws -> SignInStoreOutcome {
        var prepared = first
        for _ in 0..<3 {
            let ready: SignInStore.Prepared
            if let prepared {
                ready = prepared
            } else {
                do { ready = try await store.prepare(appleSub: record.appleSub, team: record.appleTeam, codeSHA256: nil) } catch {
                    throw SignInNotStored(cause: error)
                }
            }
            let outcome = try await store.store(record, prepared: ready, seal: seal)
            if outcome != .again { return outcome }
            prepared = nil
        }
        throw SignInNotStored(cause: SignInStoreError("the user's row kept changing during sign-in"))
    }

    private func store(_ record: SignInRecord, seal: (@Sendable (Int64) throws -> SealedTokenPair)?) async throws -> SignInOutcome {
        do {
            return answer(try await storeOutcome(record, seal: seal), record: record, tokensStored: seal != nil)
        } catch let notStored as SignInNotStored {
            throw notStored.cause
        }
    }

    /// Revokes a refresh token siwa got and could not keep, in the background.
    func revokeUnstored(_ token: String, clientID: String) {
        let (apple, logger) = (self.apple, self.logger)
        Task {
            let outcome = await apple.revoke(token: token, clientID: clientID)
            logger.info("Revoked a refresh token that was not stored", metadata: ["client_id": "\(clientID)", "apple": "\(outcome)"])
        }
    }

    /// The first answer again, for a retried request (the same code).
    func answer(replaying earlier: SignInReplay, sub: String, team: String, signedInAt: Date) async throws -> SignInOutcome {
        guard earlier.appleSub == sub else {
            // Never the first user's record for another user's token.
            return .refused(reason: "invalid_grant", detail: "this authorization code was used for another user")
        }
        guard let user = try await directory.user(appleSub: sub, team: team), user.userID == earlier.userID else {
            return .refused(reason: "invalid_grant", detail: "this authorization code was used for an account that no longer exists")
        }
        // Revoked, deleted or signed out since the first answer: the same
        // token is as stale now as a replay of it would be.
        if user.status != "active" || user.staleTokensUntil.map({ signedInAt <= $0 }) == true {
            return .staleIdentityToken
        }
        return .signedIn(SignedInUser(userID: user.userID, appleSub: sub, appleTeam: team, clientID: user.clientID,
                                      status: user.status, email: user.email,
                                      emailVerified: user.emailVerified, isPrivateEmail: user.isPrivateEmail,
                                      givenName: user.givenName, familyName: user.familyName, realUserStatus: user.realUserStatus,
                                      isNewUser: earlier.isNewUser, refreshTokenStored: earlier.refreshTokenStored))
    }

    private func answer(_ outcome: SignInStoreOutcome, record: SignInRecord, tokensStored: Bool) -> SignInOutcome {
        switch outcome {
        case .deletionInProgress, .again:
            return .deletionInProgress
        case .staleIdentityToken:
            return .staleIdentityToken
        case .stored(let userID, let isNew, let profile):
            return .signedIn(SignedInUser(userID: userID, appleSub: record.appleSub, appleTeam: record.appleTeam,
                                          clientID: record.clientID, status: "active", email: profile.email,
                                          emailVerified: profile.emailVerified, isPrivateEmail: profile.isPrivateEmail,
                                          givenName: profile.givenName, familyName: profile.familyName,
                                          realUserStatus: profile.realUserStatus, isNewUser: isNew, refreshTokenStored: tokensStored))
        }
    }

    /// What a verified identity token and the app's names store: the
    /// claims as Apple sent them, with an empty `email` as none (Apple
    /// School Manager accounts), `is_private_email` read from the address
    /// when Apple leaves it out, and `email_verified` only with an address.
    static func record(of verified: VerifiedIdentityToken, team: String, givenName: String?, familyName: String?,
                       apiKeyName: String) -> SignInRecord {
        let claims = verified.claims
        return SignInRecord(
            appleSub: claims.sub, appleTeam: team, clientID: verified.audience, email: claims.email, isPrivateEmail: claims.emailIsPrivate,
            givenName: name(givenName), familyName: name(familyName), realUserStatus: claims.realUserStatusValue,
            signedInAt: verified.issuedAt, codeSHA256: nil, apiKeyName: apiKeyName,
            emailVerified: claims.email == nil ? nil : claims.emailVerified, orgID: claims.orgID, transferSub: claims.transferSub)
    }

    /// A name from Apple's `user` object as the app passed it on: trimmed,
    /// control characters removed, at most 100 characters; nil when empty.
    static func name(_ raw: String?) -> String? {
        guard let raw else { return nil }
        let cleaned = String(String.UnicodeScalarView(raw.unicodeScalars.filter { !$0.properties.generalCategory.isControlOrFormat }))
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return cleaned.isEmpty ? nil : String(cleaned.prefix(100))
    }
}

extension Unicode.GeneralCategory {
    /// Cc (control), Cf (format: bidi overrides, zero-width joiners), and
    /// the unassigned, surrogate and private-use code points.
    fileprivate var isControlOrFormat: Bool {
        switch self {
        case .control, .format, .surrogate, .privateUse, .unassigned: true
        default: false
        }
    }
}
