import AccountLifecycle
import AccountStore
import AppleSimulator
import Foundation
import NIOHTTP1
import SIWAClient
import Testing

/// `POST /v1/sign-in` end to end: real HTTP to siwa through SIWAClient (the
/// client an app's backend uses), siwa's real HTTP to the simulator's
/// `/auth/token` with an ES256 client secret, real PostgreSQL as the
/// runtime role. A body that is no sign-in request (`{`) goes raw.
@Suite("Sign-in", .testDatabases)
struct SignInTests {
    static let client = ServerHarness.clientID

    /// A running siwa with sign-in on, and an API key.
    struct Setup: Sendable {
        let server: ServerHarness
        let fixture: SimulatedTeamKeyFiles
        let key: String
        var apple: AppleSimulator { server.simulator }

        static func start(settings: [String: String] = [:]) async throws -> Setup {
            let fixture = try SignInFixture.files()
            let server = try await ServerHarness.start(settings: settings, signIn: fixture)
            return Setup(server: server, fixture: fixture, key: try await SignInFixture.apiKey(in: server.database))
        }

        /// SIWAClient with this setup's API key (or `key`), no retry.
        func client(key: String? = nil, retry: SIWAClient.RetryPolicy = .never) throws -> SIWAClient {
            try SIWAClient.forTests(apiURL: server.apiURL, key: key ?? self.key, retry: retry)
        }

        /// `POST /v1/sign-in` through SIWAClient.
        func signIn(_ body: [String: Any], key: String? = nil) async throws -> ClientAnswer<SIWAClient.SignedInUser> {
            try await client(key: key).signIn(json: body)
        }

        /// `GET /v1/users/{sub}` through SIWAClient.
        func lookup(_ sub: String, key: String? = nil) async throws -> ClientAnswer<SIWAClient.UserLookup> {
            try await client(key: key).lookup(sub)
        }

        /// What the app hands its backend: an identity token and a fresh code
        /// for `sub`, and the raw `nonce` (Apple's token carries its SHA-256).
        func appleSignIn(sub: String, email: String? = "user@privaterelay.appleid.com", nonce: String? = nil,
                         user: [String: Any]? = nil, idTokenSub: String? = nil) throws -> [String: Any] {
            let hashed = nonce.map(SignInService.hashedNonce)
            let token = try apple.identityToken(sub: sub, audience: SignInTests.client, email: email, nonce: hashed)
            let code = apple.issueAuthorizationCode(sub: sub, clientID: SignInTests.client, email: email,
                                                    isPrivateEmail: true, nonce: hashed, idTokenSub: idTokenSub)
            var body: [String: Any] = ["identity_token": token, "authorization_code": code]
            if let nonce { body["nonce"] = nonce }
            if let user { body["user"] = user }
            return body
        }

        /// GET on the API listener (`/v1`), raw: for the tests of the answer's bytes.
        func get(_ path: String, key: String? = nil) async throws -> HTTPAnswer {
            try await HTTPAnswer.send(method: .GET, url: server.apiURL + path, body: nil,
                                      headers: [("Authorization", "Bearer \(key ?? self.key)")])
        }
    }

    /// The nonce's hash as the app puts it in Apple's request: SHA-256 in
    /// lower-case hex (FIPS 180-2's "abc" vector; the other tests make
    /// their tokens with hashedNonce itself, so only this checks its digits).
    @Test func theNonceIsHashedAsTheAppHashesIt() {
        #expect(SignInService.hashedNonce("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SignInService.hashedNonce("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func aNewUserThenAReturningUser() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let user: [String: Any] = ["name": ["firstName": "  Ada\u{0007}\u{202E}  ", "lastName": String(repeating: "L", count: 150)],
                                   "email": "user@privaterelay.appleid.com"]
        let first = try await setup.signIn(try setup.appleSignIn(sub: "001.new.0001", user: user))
        let signedIn = try #require(first.value, "\(first.text)")
        #expect(signedIn.isNewUser && signedIn.refreshTokenStored)
        #expect(signedIn.appleSub == "001.new.0001" && signedIn.status == .active && signedIn.team == TestEnvironment.team
                && signedIn.clientId == Self.client)
        #expect(signedIn.email == "user@privaterelay.appleid.com" && signedIn.isPrivateEmail == true)
        #expect(signedIn.realUserStatus == 2)
        let names = try await setup.server.database.strings(
            "SELECT given_name || '|' || length(family_name) FROM siwa.users WHERE apple_sub = '001.new.0001'")
        #expect(names == ["Ada|100"], "names are trimmed, without control characters, at most 100 characters")

        // Returning: no `user` object; the names stay; the same id.
        let again = try await setup.signIn(try setup.appleSignIn(sub: "001.new.0001",
                                                                  user: ["name": ["firstName": "Mallory"]]))
        #expect(again.status == 200 && again.value?.isNewUser == false)
        #expect(again.value?.userId == signedIn.userId)
        #expect(try await setup.server.database.strings("SELECT given_name FROM siwa.users WHERE apple_sub = '001.new.0001'") == ["Ada"])
        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 1)
        #expect(try await setup.server.database.scalar(
            "SELECT count(*) FROM siwa.audit_log WHERE action = 'user.signed_in' AND details->>'api_key' = 'backend'") == 2)

        let shown = try #require(try await setup.lookup("001.new.0001").value?.user)
        #expect(shown.userId == signedIn.userId && shown.refreshToken.stored && shown.lastSignInAt != nil)
        #expect(shown.purge == nil && shown.emailForwardingEnabled)
        #expect(try await setup.lookup("001.unknown.0001").value == .notFound)
    }

    /// A lost response: the same request again gets the first answer, not
    /// Apple's invalid_grant; the code with another user's token gets 400.
    @Test func aRetriedRequestIsAnsweredTheSameAndAReusedCodeIsRefused() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let body = try setup.appleSignIn(sub: "001.retry.0001")
        let first = try await setup.signIn(body)
        let second = try await setup.signIn(body)
        #expect(first.status == 200 && second.status == 200, "\(second.text)")
        #expect(second.value?.userId == first.value?.userId && second.value?.isNewUser == true)
        #expect(setup.apple.tokenRequests == 1, "the retry is answered without asking Apple again")

        var stolen = try setup.appleSignIn(sub: "001.other.0002")
        stolen["authorization_code"] = body["authorization_code"]
        let refused = try await setup.signIn(stolen)
        #expect(refused.status == 400 && refused.reason == "invalid_grant" && refused.value == nil, "\(refused.text)")
        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = '001.other.0002'") == 0)

        // A code Apple has seen (used by another request long ago, or expired).
        let used = try setup.appleSignIn(sub: "001.used.0003")
        setup.apple.expireCode(used["authorization_code"] as? String ?? "")
        let expired = try await setup.signIn(used)
        #expect(expired.status == 400 && expired.reason == "invalid_grant")
    }

    @Test func theIdentityTokenIsVerified() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let apple = setup.apple
        var wrongAudience = try setup.appleSignIn(sub: "001.v.0001")
        wrongAudience["identity_token"] = try apple.identityToken(sub: "001.v.0001", audience: "com.someone.else")
        #expect(try await setup.signIn(wrongAudience).reason == "wrong_aud")

        var expired = try setup.appleSignIn(sub: "001.v.0001")
        expired["identity_token"] = try apple.identityToken(sub: "001.v.0001", audience: Self.client,
                                                            issuedAt: Date().addingTimeInterval(-2 * 86400))
        #expect(try await setup.signIn(expired).reason == "expired")

        var wrongNonce = try setup.appleSignIn(sub: "001.v.0001", nonce: "n-1")
        wrongNonce["nonce"] = "n-2"
        #expect(try await setup.signIn(wrongNonce).reason == "nonce_mismatch")

        for supported in [true, false] {
            var claims = TokenSigner.identityClaims(sub: "001.v.0002", audience: Self.client)
            claims["nonce_supported"] = supported
            var body = try setup.appleSignIn(sub: "001.v.0002")
            body["identity_token"] = try apple.signer.sign(header: ["kid": apple.currentKey.kid, "alg": "RS256"],
                                                           claims: claims, key: apple.currentKey)
            body["nonce"] = "expected"
            let answer = try await setup.signIn(body)
            if supported {
                #expect(answer.status == 400 && answer.reason == "nonce_missing", "\(answer.text)")
            } else {
                #expect(answer.status == 200, "a device without nonce support is accepted: \(answer.text)")
            }
        }
        #expect(try await setup.signIn(["identity_token": "not.a.token", "authorization_code": "c"]).reason == "malformed_token")
        let malformed = try await HTTPAnswer.send(method: .POST, url: setup.server.apiURL + "/v1/sign-in", body: Data("{".utf8),
                                                  headers: [("Authorization", "Bearer \(setup.key)")])
        #expect(malformed.status == 400 && malformed.reason == "malformed_request")
        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = '001.v.0001'") == 0)
    }

    @Test func applesAnswersBecomeClearStatuses() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let mismatch = try await setup.signIn(try setup.appleSignIn(sub: "001.a.0001", idTokenSub: "001.a.9999"))
        #expect(mismatch.status == 400 && mismatch.reason == "token_mismatch", "\(mismatch.text)")

        setup.apple.setTokenEndpointBehaviour(.status(503))
        let down = try await setup.signIn(try setup.appleSignIn(sub: "001.a.0002"))
        #expect(down.status == 503 && down.refusal?.retryAfterSeconds != nil, "\(down.text)")

        setup.apple.setTokenEndpointBehaviour(.stall)
        let started = ContinuousClock.now
        let stalled = try await setup.signIn(try setup.appleSignIn(sub: "001.a.0003"))
        let waited = ContinuousClock.now - started
        #expect(stalled.status == 503 && waited < .seconds(9), "the 5 s deadline holds: \(waited)")

        setup.apple.setTokenEndpointBehaviour(.status(400, error: "invalid_client"))
        let badClient = try await setup.signIn(try setup.appleSignIn(sub: "001.a.0004"))
        #expect(badClient.status == 502 && badClient.reason == "apple_rejected_client")
        let metrics = try await setup.server.getMetrics()
        #expect(metrics.text.contains("siwa_apple_invalid_client_total"))

        setup.apple.setTokenEndpointBehaviour(.normal)
        #expect(try await setup.signIn(try setup.appleSignIn(sub: "001.a.0005")).status == 200)
        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.users") == 1)
    }

    @Test func theAPIKeyIsRequired() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let body = try setup.appleSignIn(sub: "001.k.0001")
        let none = try await HTTPAnswer.send(method: .POST, url: setup.server.apiURL + "/v1/sign-in",
                                             body: try JSONSerialization.data(withJSONObject: body), headers: [])
        #expect(none.status == 401 && none.reason == "unauthorized")
        #expect(try await setup.signIn(body, key: "siwa_aaaaaaaaaaaa_" + String(repeating: "A", count: 43)).status == 401)
        #expect(try await setup.lookup("001.k.0001", key: "nonsense").status == 401)
        // Revoked: refused at once.
        try await setup.server.database.withClient { client in
            _ = try await APIKeyAdministration(client: client, logger: TestEnvironment.logger).revoke(name: "backend", loginHint: nil)
        }
        #expect(try await setup.signIn(body).status == 401)
        #expect(setup.apple.tokenRequests == 0)
    }

    /// The refresh token is stored encrypted: a dump of the database holds
    /// none of its text.
    @Test func aDumpOfTheDatabaseHoldsNoToken() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        for index in 0..<3 {
            #expect(try await setup.signIn(try setup.appleSignIn(sub: "001.dump.000\(index)")).status == 200)
        }
        let issued = setup.apple.issuedRefreshTokens
        #expect(issued.count == 3)
        let dump = try await pgDump(setup.server.database)
        #expect(dump.contains("001.dump.0000"), "the dump is of the right database")
        for token in issued { #expect(!dump.contains(token)) }
    }
}

/// Races between a sign-in and what ends an account.
@Suite("Sign-in races", .testDatabases)
struct SignInRaceTests {
    /// A sign-in that waits for a concurrent deletion's transaction must see
    /// the purge it enqueued (409), not start a new account the purge would
    /// then erase.
    @Test func aSignInWaitingForADeletionIsRefusedNotRestarted() async throws {
        let setup = try await SignInTests.Setup.start()
        try atTestEnd { await setup.server.stop() }
        let db = setup.server.database
        let sub = "001.race.0001"
        let first = try await setup.signIn(try setup.appleSignIn(sub: sub))
        #expect(first.status == 200)
        // The deletion holds the user row, as DELETE /v1/users (or an
        // account-delete notification) does until it commits...
        let signIn = try await OpenConnection.with(db.serveConfiguration) { deletion in
            try await deletion.run("BEGIN")
            try await deletion.run("UPDATE siwa.users SET status = 'deleted' WHERE apple_sub = '\(sub)'")
            try await deletion.run("SELECT siwa.enqueue_purge('\(sub)', 'TEAM123456', 'app-deletion', NULL, false, false, '{}')")
            // ...while the user signs in again.
            let body = try setup.appleSignIn(sub: sub)
            let signIn = Task { try await setup.signIn(body) }
            #expect(try await eventually(upTo: .seconds(10)) { try await InboxConcurrencyTests.waitingForALock(db) },
                    "the sign-in never reached the user row")
            try await deletion.run("COMMIT")
            return signIn
        }
        let answer = try await signIn.value
        // Refused either way: the purge is pending, or (a token of the
        // deletion's second, Apple's iat being whole seconds) the token is
        // as old as the deletion.
        #expect(answer.status == 409 && ["deletion_in_progress", "stale_identity_token"].contains(answer.reason), "\(answer.text)")
        #expect(try await db.strings("SELECT status || '/' || id::text FROM siwa.users WHERE apple_sub = '\(sub)'")
                == ["deleted/\(first.value?.userId ?? -1)"], "not restarted")
        // The token Apple issued for the refused sign-in is revoked, not left live.
        #expect(try await eventually(upTo: .seconds(10)) { setup.apple.revokedTokens.count == 1 })
    }
}
