import AccountLifecycle
import AccountStore
import AppleSimulator
import Foundation
import SIWAClient
import SIWAConfiguration
import SIWAServer
import Testing

/// `POST /v1/sign-in` from a web client that asked Apple for
/// `response_type=code` (Sign in with Apple JS): an authorization code, its
/// client id and redirect URI, no identity token. Real HTTP to siwa through
/// SIWAClient, siwa's real HTTP to the simulator's `/auth/token`, real PostgreSQL.
@Suite("Sign-in on the web", .testDatabases)
struct SignInWebTests {
    static let native = ServerHarness.clientID
    static let web = "com.example.siwa.web"
    static let returnURL = "https://app.example.com/auth/apple/callback"
    static let otherReturnURL = "https://app.example.com/other/callback"
    static let settings = [
        "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "\(native),\(web)",
        "SIWA_APPLE_WEB_CLIENT_IDS": "\(web)=\(returnURL), \(web)=\(otherReturnURL)",
    ]

    static func start() async throws -> SignInTests.Setup {
        try await SignInTests.Setup.start(settings: settings)
    }

    /// What a web client's backend gets at its redirect URI: a fresh code
    /// bound to `redirectURI`, and the body it sends siwa.
    static func webSignIn(_ setup: SignInTests.Setup, sub: String, nonce: String? = nil, redirectURI: String? = returnURL,
                          issuedFor: String = returnURL, idTokenAudience: String? = nil) -> [String: Any] {
        let code = setup.apple.issueAuthorizationCode(sub: sub, clientID: web, email: "web@privaterelay.appleid.com", isPrivateEmail: true,
                                                      nonce: nonce.map(SignInService.hashedNonce), idTokenAudience: idTokenAudience,
                                                      redirectURI: issuedFor)
        var body: [String: Any] = ["authorization_code": code, "client_id": web]
        if let redirectURI { body["redirect_uri"] = redirectURI }
        if let nonce { body["nonce"] = nonce }
        return body
    }

    @Test func aWebClientSignsInWithACodeOnlyAndIsAnsweredAsANativeAppIs() async throws {
        let setup = try await Self.start()
        try atTestEnd { await setup.server.stop() }
        var body = Self.webSignIn(setup, sub: "001.web.0001", nonce: "raw-nonce-1")
        // Apple's form_post hands the backend `user` as a string of JSON.
        body["user"] = #"{"name":{"firstName":"Wendy","lastName":"Web"},"email":"web@privaterelay.appleid.com"}"#
        let first = try await setup.signIn(body)
        let user = try #require(first.value, "\(first.text)")
        #expect(user.appleSub == "001.web.0001" && user.isNewUser && user.clientId == Self.web)
        #expect(user.refreshTokenStored && user.status == .active)
        #expect(user.email == "web@privaterelay.appleid.com" && user.isPrivateEmail == true)
        #expect(setup.apple.lastTokenForm?["redirect_uri"] == Self.returnURL && setup.apple.lastTokenForm?["client_id"] == Self.web)

        // The same answer as a native sign-in's (the client reads both as SignedInUser).
        let native = try await setup.signIn(try setup.appleSignIn(sub: "001.native.0001"))
        #expect(native.status == 200 && native.value?.clientId == Self.native, "\(native.text)")

        let database = setup.server.database
        #expect(try await database.strings("""
            SELECT u.given_name || ' ' || u.family_name || ' ' || t.client_id FROM siwa.users u JOIN siwa.apple_tokens t ON t.user_id = u.id
            WHERE u.apple_sub = '001.web.0001'
            """) == ["Wendy Web \(Self.web)"])

        // Returning: another code, no `user`; the same user, names kept.
        let again = try await setup.signIn(Self.webSignIn(setup, sub: "001.web.0001", redirectURI: Self.otherReturnURL,
                                                          issuedFor: Self.otherReturnURL))
        #expect(again.status == 200 && again.value?.isNewUser == false, "\(again.text)")
        #expect(again.value?.userId == user.userId)
        #expect(try await database.strings("SELECT given_name FROM siwa.users WHERE apple_sub = '001.web.0001'") == ["Wendy"])
        #expect(try await database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'user.signed_in' AND apple_sub = '001.web.0001'
            """) == 2)

        // A lost answer: the same request again gets the first answer.
        let retried = Self.webSignIn(setup, sub: "001.web.0002")
        let once = try await setup.signIn(retried)
        let twice = try await setup.signIn(retried)
        #expect(once.status == 200 && twice.status == 200 && twice.value?.userId == once.value?.userId, "\(twice.text)")
        #expect(twice.value?.isNewUser == true)
    }

    /// What siwa can tell is refused before Apple is called, with a
    /// reason, and no row is written.
    @Test func whatAppleWouldRefuseIsRefusedBeforeAppleIsCalled() async throws {
        let setup = try await Self.start()
        try atTestEnd { await setup.server.stop() }
        let missing = try await setup.signIn(Self.webSignIn(setup, sub: "001.early.0001", redirectURI: nil))
        #expect(missing.status == 400 && missing.reason == "redirect_uri_required", "\(missing.text)")
        let wrong = try await setup.signIn(Self.webSignIn(setup, sub: "001.early.0001", redirectURI: "https://evil.example/callback"))
        #expect(wrong.status == 400 && wrong.reason == "redirect_uri_required", "\(wrong.text)")

        var noClient = Self.webSignIn(setup, sub: "001.early.0001")
        noClient["client_id"] = nil
        #expect(try await setup.signIn(noClient).reason == "client_id_required")
        var unknownClient = Self.webSignIn(setup, sub: "001.early.0001")
        unknownClient["client_id"] = "com.someone.else"
        #expect(try await setup.signIn(unknownClient).reason == "wrong_aud")
        let nothing = try await setup.signIn(["client_id": Self.web, "redirect_uri": Self.returnURL])
        #expect(nothing.status == 400 && nothing.reason == "identity_token_or_code_required", "\(nothing.text)")
        var badNonce = Self.webSignIn(setup, sub: "001.early.0001")
        badNonce["nonce"] = ""
        #expect(try await setup.signIn(badNonce).reason == "malformed_request")

        // A web client with an identity token too (`response_type=code id_token`): the same rule.
        let token = try setup.apple.identityToken(sub: "001.early.0001", audience: Self.web)
        var both = Self.webSignIn(setup, sub: "001.early.0001", redirectURI: nil)
        both["identity_token"] = token
        #expect(try await setup.signIn(both).reason == "redirect_uri_required")
        both["redirect_uri"] = Self.returnURL
        both["client_id"] = Self.native
        #expect(try await setup.signIn(both).reason == "wrong_aud", "client_id must be the token's aud")

        #expect(setup.apple.tokenRequests == 0, "Apple was never asked")
        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.users") == 0)
    }

    /// Apple's `invalid_grant`, reported in words that help.
    @Test func aCodeAppleRefusesIsExplained() async throws {
        let setup = try await Self.start()
        try atTestEnd { await setup.server.stop() }
        // A code used long ago (its first answer is past the replay window).
        let used = Self.webSignIn(setup, sub: "001.used.0001")
        #expect(try await setup.signIn(used).status == 200)
        try await setup.server.database.execute("UPDATE siwa.sign_in_codes SET created_at = created_at - interval '1 hour'")
        let refused = try await setup.signIn(used)
        #expect(refused.status == 400 && refused.reason == "invalid_grant", "\(refused.text)")
        #expect(refused.refusal?.detail.contains("the code was used, expired, or issued for another client or redirect URI") == true)

        // Issued for one registered Return URL, sent with another: only Apple can tell.
        let elsewhere = try await setup.signIn(Self.webSignIn(setup, sub: "001.used.0002", redirectURI: Self.otherReturnURL))
        #expect(elsewhere.status == 400 && elsewhere.reason == "invalid_grant", "\(elsewhere.text)")
        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = '001.used.0002'") == 0)
    }

    /// The id_token of Apple's answer is verified as an identity token is;
    /// one refused is not stored, and its refresh token is revoked.
    @Test func applesIDTokenIsVerified() async throws {
        let setup = try await Self.start()
        try atTestEnd { await setup.server.stop() }
        var mismatch = Self.webSignIn(setup, sub: "001.id.0001", nonce: "n-1")
        mismatch["nonce"] = "n-2"
        let nonce = try await setup.signIn(mismatch)
        #expect(nonce.status == 400 && nonce.reason == "nonce_mismatch", "\(nonce.text)")

        let otherAudience = try await setup.signIn(Self.webSignIn(setup, sub: "001.id.0002", idTokenAudience: Self.native))
        #expect(otherAudience.status == 400 && otherAudience.reason == "wrong_aud", "\(otherAudience.text)")

        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.users") == 0)
        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 0)
        let deadline = ContinuousClock.now + .seconds(10)
        while setup.apple.revokedTokens.count < 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(setup.apple.issuedRefreshTokens.allSatisfy { !setup.apple.isRefreshTokenLive($0) }, "tokens siwa did not keep are revoked")
    }

    @Test func appleDownIs503() async throws {
        let setup = try await Self.start()
        try atTestEnd { await setup.server.stop() }
        setup.apple.setTokenEndpointBehaviour(.status(503))
        let down = try await setup.signIn(Self.webSignIn(setup, sub: "001.down.0001"))
        #expect(down.status == 503 && down.reason == "unavailable" && down.refusal?.retryAfterSeconds != nil, "\(down.text)")
        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.users") == 0)
        setup.apple.setTokenEndpointBehaviour(.normal)
        #expect(try await setup.signIn(Self.webSignIn(setup, sub: "001.down.0001")).status == 200)
    }

    /// The simulator's authorize route issues what a web client gets: a
    /// code only, bound to the redirect URI (and refuses a code-only grant
    /// without one, as Apple's authorization request does).
    @Test func theSimulatorIssuesACodeOnlyGrant() async throws {
        let setup = try await Self.start()
        try atTestEnd { await setup.server.stop() }
        let apple = setup.server.appleServer.baseURL + "/simulator/authorize"
        let query = "sub=001.sim.0001&client_id=\(Self.web)&response_type=code"
        let refused = try await HTTPAnswer.send(method: .POST, url: "\(apple)?\(query)", body: nil, headers: [])
        #expect(refused.status == 400)
        let granted = try await HTTPAnswer.send(method: .POST, url: "\(apple)?\(query)&redirect_uri=\(Self.returnURL)", body: nil, headers: [])
        #expect(granted.status == 200 && granted.json["identity_token"] == nil, "\(granted.text)")
        #expect(granted.json["redirect_uri"] as? String == Self.returnURL && granted.json["client_id"] as? String == Self.web)
        // Posted to siwa as it came.
        let signedIn = try await setup.signIn(granted.json)
        #expect(signedIn.status == 200 && signedIn.value?.appleSub == "001.sim.0001", "\(signedIn.text)")
    }

    @Test func theWebClientSettingIsCheckedAtStart() throws {
        let base = ["SIWA_DATABASE_URL": "postgres://u@h/d", "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "app,web"]
        func read(_ value: String) throws -> WebClients {
            try ServerSettings(environment: SettingsReader(base.merging(["SIWA_APPLE_WEB_CLIENT_IDS": value]) { $1 })).clients.web
        }
        #expect(try ServerSettings(environment: SettingsReader(base)).clients.web == WebClients())
        #expect(try read("web") == WebClients(returnURLs: ["web": []]))
        #expect(try read("web=https://a.example/cb, web=https://b.example/cb")
                == WebClients(returnURLs: ["web": ["https://a.example/cb", "https://b.example/cb"]]))
        for bad in ["other", "web=http://a.example/cb", "web=notaurl", " , "] {
            #expect(throws: SettingError.self, "\(bad)") { _ = try read(bad) }
            do { _ = try read(bad) } catch let error as SettingError { #expect(error.name == "SIWA_APPLE_WEB_CLIENT_IDS") }
        }
    }
}
