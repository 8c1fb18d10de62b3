import AccountLifecycle
import AppleSignIn
import AppleSimulator
import Foundation
import Synchronization
import SIWAClient
import Testing

/// The claims Apple sends, kept and given back (issue 21, §4): over HTTP,
/// real PostgreSQL, the simulator, and Apple's genuine tokens (verified at
/// their issue time: siwa's identity token clock is moved there).
@Suite("Sign-in claims", .testDatabases)
struct SignInClaimsTests {
    typealias Setup = SignInTests.Setup
    static let client = ServerHarness.clientID

    /// siwa serving Apple's genuine `token` alone (`SIWA_SIGN_IN_REQUIRES=token`:
    /// its code is long used), with Apple's key set of the day and the
    /// clock at its issue time.
    static func genuine(_ file: String) async throws -> (Setup, Fixtures.RealToken) {
        let token = try #require(try Fixtures.realTokens().first { $0.file == file })
        let fixture = try SignInFixture.files()
        let apple = try AppleSimulator()
        apple.serve(document: token.jwks)
        let server = try await ServerHarness.start(
            settings: ["SIWA_SIGN_IN_REQUIRES": "token", "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": token.aud], signIn: fixture, simulator: apple,
            adjust: { $0.identityTokenClock = { Date(timeIntervalSince1970: token.iat + 1) } })
        let setup = Setup(server: server, fixture: fixture, key: try await SignInFixture.apiKey(in: server.database))
        return (setup, token)
    }

    /// A genuine token (2025) with a relay address and no `is_private_email`:
    /// stored and answered private; its `email_verified` and
    /// `real_user_status` kept.
    @Test func aGenuineRelayAddressWithoutTheFlagIsPrivate() async throws {
        let (setup, token) = try await Self.genuine("e6q83rb15n_expo_idtoken_real_user_status.json")
        try atTestEnd { await setup.server.stop() }
        #expect(try Fixtures.unverifiedClaims(token.token)["is_private_email"] == nil, "the fixture omits the claim")
        let answer = try await setup.signIn(["identity_token": token.token])
        #expect(answer.status == 200, "\(answer.text)")
        #expect(answer.value?.email == "bc49dhtsn7@privaterelay.appleid.com")
        #expect(answer.value?.isPrivateEmail == true && answer.value?.emailVerified == true)
        #expect(answer.value?.realUserStatus == 2 && answer.value?.refreshTokenStored == false)
        #expect(try await setup.server.database.strings("""
            SELECT is_private_email::text || '/' || email_verified::text || '/' || real_user_status FROM siwa.users
            """) == ["true/true/2"])
    }

    /// A genuine token of 2019 carries no `nonce_supported` (nor email): the
    /// app sent no nonce, so it is accepted, as Apple's documents say.
    @Test func aGenuineTokenWithoutNonceSupportedIsAcceptedWithoutANonce() async throws {
        let (setup, token) = try await Self.genuine("aidopk1_funapplelogin_idtoken.json")
        try atTestEnd { await setup.server.stop() }
        let claims = try Fixtures.unverifiedClaims(token.token)
        #expect(claims["nonce_supported"] == nil && claims["nonce"] == nil)
        let answer = try await setup.signIn(["identity_token": token.token])
        #expect(answer.status == 200, "\(answer.text)")
        #expect(answer.value?.email == nil && answer.value?.isPrivateEmail == nil && answer.value?.emailVerified == nil)
        // With a nonce the app asked for, the same token is refused: the nonce is missing.
        let withNonce = try await setup.signIn(["identity_token": token.token, "nonce": "raw-nonce"])
        #expect(withNonce.status == 400 && withNonce.reason == "nonce_missing", "\(withNonce.text)")
    }

    /// A token signed for a test, with `change` applied to its claims, and a code for it.
    static func body(_ setup: Setup, sub: String, email: String?, _ change: (inout [String: any Sendable]) -> Void) throws -> [String: Any] {
        var claims = TokenSigner.identityClaims(sub: sub, audience: client, email: email)
        change(&claims)
        let key = setup.apple.currentKey
        let token = try setup.apple.signer.sign(header: ["kid": key.kid, "alg": "RS256"], claims: claims, key: key)
        return ["identity_token": token, "authorization_code": setup.apple.issueAuthorizationCode(sub: sub, clientID: client, email: email)]
    }

    @Test func anEmptyEmailIsNoEmailAndAnUnverifiedOneIsMarked() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let db = setup.server.database
        // Apple School Manager: an empty email, flagged false.
        let school = try await setup.signIn(try Self.body(setup, sub: "001.school.0001", email: "") {
            $0["email_verified"] = "false"
            $0["is_private_email"] = "false"
        })
        #expect(school.status == 200, "\(school.text)")
        #expect(school.value?.email == nil && school.value?.emailVerified == nil && school.value?.isPrivateEmail == nil)
        #expect(try await db.strings("""
            SELECT coalesce(email, 'NULL') || '/' || coalesce(email_verified::text, 'NULL') || '/' || coalesce(is_private_email::text, 'NULL')
            FROM siwa.users WHERE apple_sub = '001.school.0001'
            """) == ["NULL/NULL/NULL"])

        // A managed (Work & School) account's address Apple did not verify:
        // kept, marked unverified (the string form), not private.
        let work = try await setup.signIn(try Self.body(setup, sub: "001.work.0001", email: "ada@school.example") {
            $0["email_verified"] = "false"
            $0["is_private_email"] = nil
        })
        #expect(work.status == 200, "\(work.text)")
        #expect(work.value?.emailVerified == false && work.value?.isPrivateEmail == false)
        let shown = try await setup.lookup("001.work.0001")
        #expect(shown.value?.user?.emailVerified == false && shown.value?.user?.email == "ada@school.example")
        #expect(try await db.strings("SELECT email_verified::text FROM siwa.users WHERE apple_sub = '001.work.0001'") == ["false"])
        // A later token without an address keeps the address and its flag.
        let later = try await setup.signIn(try Self.body(setup, sub: "001.work.0001", email: nil) { _ in })
        #expect(later.status == 200 && later.value?.emailVerified == false, "\(later.text)")
    }

    /// A value Apple may add: stored as sent, answered 1 (unknown), never a 400.
    @Test func aRealUserStatusOutsideZeroToTwoIsStoredAndAnsweredUnknown() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let answer = try await setup.signIn(try Self.body(setup, sub: "001.rus.0007", email: nil) { $0["real_user_status"] = 7 })
        #expect(answer.status == 200, "\(answer.text)")
        #expect(answer.value?.realUserStatus == 1)
        #expect(try await setup.lookup("001.rus.0007").value?.user?.realUserStatus == 1)
        #expect(try await setup.server.database.scalar("SELECT real_user_status FROM siwa.users WHERE apple_sub = '001.rus.0007'") == 7)
    }

    /// `org_id` (Apple Business) and `transfer_sub` are kept; `org_id` is shown.
    @Test func orgIDAndTransferSubAreKept() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let answer = try await setup.signIn(try Self.body(setup, sub: "001.org.0001", email: "ada@business.example") {
            $0["org_id"] = "D3A1B2C4-0000-4000-8000-00000000A11E"
            $0["transfer_sub"] = "000123.transfer.0001"
        })
        #expect(answer.status == 200, "\(answer.text)")
        #expect(try await setup.lookup("001.org.0001").value?.user?.orgId == "D3A1B2C4-0000-4000-8000-00000000A11E")
        #expect(try await setup.server.database.strings("""
            SELECT org_id || '/' || transfer_sub FROM siwa.users WHERE apple_sub = '001.org.0001'
            """) == ["D3A1B2C4-0000-4000-8000-00000000A11E/000123.transfer.0001"])
        // A later token without them keeps them.
        #expect(try await setup.signIn(try Self.body(setup, sub: "001.org.0001", email: nil) { _ in }).status == 200)
        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.users WHERE org_id IS NOT NULL AND transfer_sub IS NOT NULL") == 1)
    }

    /// A token without `nonce_supported`, and no nonce sent: accepted (the
    /// simulator's shape of a platform that says nothing about nonces).
    @Test func noNonceSupportedClaimAndNoNonceIsAccepted() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let answer = try await setup.signIn(try Self.body(setup, sub: "001.nonce.0001", email: nil) {
            $0["nonce_supported"] = nil
            $0["nonce"] = nil
        })
        #expect(answer.status == 200, "\(answer.text)")
    }

    /// The names are answered by the sign-in and `GET /v1/users`; an app
    /// passing a name again later changes nothing; after a revocation Apple
    /// asks for the name again, and the one given replaces the stored pair.
    @Test func namesAreAnsweredAndReplacedOnAReconnectionAfterARevocation() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let (apple, db, sub) = (setup.apple, setup.server.database, "001.names.0001")
        func post(_ signIn: SimulatedSignIn, user: [String: Any]? = nil) async throws -> ClientAnswer<SIWAClient.SignedInUser> {
            var body: [String: Any] = signIn.signInBody
            if let user { body["user"] = user }
            return try await setup.signIn(body)
        }

        // Signed in a minute ago, again half a minute ago; revoked ten
        // seconds ago (a revocation older than a sign-in changes nothing).
        let first = try apple.signIn(sub: sub, clientID: Self.client, email: "ada@privaterelay.appleid.com",
                                     givenName: "Ada", familyName: "Lovelace", issuedAt: Date().addingTimeInterval(-60))
        #expect(first.firstAuthorization && first.user != nil)
        let signedUp = try await post(first)
        #expect(signedUp.status == 200, "\(signedUp.text)")
        #expect(signedUp.value?.givenName == "Ada" && signedUp.value?.familyName == "Lovelace")
        #expect(signedUp.value?.realUserStatus == 2)

        // Not a first authorization: no `user` from Apple; a name the app
        // sends anyway does not replace the stored one.
        let second = try apple.signIn(sub: sub, clientID: Self.client, email: "ada@privaterelay.appleid.com",
                                      issuedAt: Date().addingTimeInterval(-30))
        #expect(!second.firstAuthorization && second.user == nil)
        let again = try await post(second, user: ["name": ["firstName": "Mallory"]])
        #expect(again.status == 200 && again.value?.givenName == "Ada", "\(again.text)")
        #expect(again.value?.realUserStatus == 2, "kept from the first sign-in")

        // The user revokes the app at Apple: the token dies, Apple notifies.
        for token in apple.issuedRefreshTokens { apple.revokeRefreshToken(token) }
        let revoked = try await setup.server.post(token: setup.server.notification("consent-revoked", sub: sub,
                                                                                   eventTime: Date().addingTimeInterval(-10)))
        #expect(revoked.status == 200, "\(revoked.text)")
        #expect(try await db.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["consent_revoked"])

        // They come back: a first authorization again, with the name they give now.
        let back = try apple.signIn(sub: sub, clientID: Self.client, email: "ada@privaterelay.appleid.com",
                                    givenName: "Ada", familyName: "King")
        #expect(back.firstAuthorization && back.user != nil)
        let reconnected = try await post(back)
        #expect(reconnected.status == 200, "\(reconnected.text)")
        #expect(reconnected.value?.givenName == "Ada" && reconnected.value?.familyName == "King")
        let shown = try await setup.lookup(sub)
        #expect(shown.value?.user?.givenName == "Ada" && shown.value?.user?.familyName == "King", "\(shown.text)")
        #expect(shown.value?.user?.status == .active)
        // Audited without the names.
        #expect(try await db.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'user.signed_in' AND apple_sub = '\(sub)'
              AND details->>'names_replaced' = 'true'
            """) == 1)
        #expect(try await db.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE details::text ~ '(Lovelace|King|Mallory|privaterelay)'
            """) == 0)

        // And a sign-in after that one is an ordinary one again.
        let later = try await post(try apple.signIn(sub: sub, clientID: Self.client), user: ["name": ["firstName": "Eve"]])
        #expect(later.status == 200 && later.value?.givenName == "Ada", "\(later.text)")
    }
}
