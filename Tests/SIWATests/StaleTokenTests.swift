import AccountLifecycle
import Foundation
import Testing

/// An old identity token cannot bring an account back: a token issued at or
/// before the user's last revocation, deletion or purge is refused (409
/// stale_identity_token) and changes nothing, whatever
/// SIWA_SIGN_IN_REQUIRES says; and by default (`code`) a token alone, which
/// anyone holding it can replay, signs nobody in.
@Suite("Stale identity tokens", .testDatabases, .timeLimit(.minutes(10)))
struct StaleTokenTests {
    typealias Setup = AccountDeletionTests.Setup

    /// The user's row as the tests compare it before and after a refusal.
    static func row(_ setup: Setup, _ sub: String) async throws -> [String] {
        try await setup.database.strings("""
            SELECT id || '/' || status || '/' || coalesce(email, '-') || '/' || coalesce(given_name, '-') || '/'
                   || (purged_at IS NOT NULL)::text || '/' || updated_at::text
            FROM siwa.users WHERE apple_sub = '\(sub)'
            """)
    }

    static func tokenBody(_ setup: Setup, sub: String, issuedAt: Date, nonce: String? = nil,
                          email: String? = "back@privaterelay.appleid.com") throws -> [String: Any] {
        var body: [String: Any] = ["identity_token": try setup.apple.identityToken(
            sub: sub, audience: ServerHarness.clientID, issuedAt: issuedAt, email: email,
            nonce: nonce.map(SignInService.hashedNonce))]
        if let nonce { body["nonce"] = nonce }
        return body
    }

    @Test(arguments: ["code", "code_or_nonce", "token"])
    func aTokenFromBeforeAConsentRevocationIsRefused(_ requires: String) async throws {
        let setup = try await Setup.start(server: ["SIWA_SIGN_IN_REQUIRES": requires])
        try atTestEnd { await setup.stop() }
        let sub = "001.stale.\(requires)"
        _ = try await setup.signedIn(sub)
        let old = Date().addingTimeInterval(-5)
        #expect(try await setup.signIn.server.post(token: setup.signIn.server.notification(
            "consent-revoked", sub: sub, eventTime: Date())).status == 200)
        let before = try await Self.row(setup, sub)
        #expect(before.first?.contains("/consent_revoked/") == true, "\(before)")

        // The old token with a fresh code (every mode accepts a code), and alone where the mode allows it.
        var withCode = try setup.signIn.appleSignIn(sub: sub)
        withCode["identity_token"] = try setup.apple.identityToken(sub: sub, audience: ServerHarness.clientID, issuedAt: old)
        var bodies = [withCode]
        if requires == "token" { bodies.append(try Self.tokenBody(setup, sub: sub, issuedAt: old)) }
        if requires == "code_or_nonce" { bodies.append(try Self.tokenBody(setup, sub: sub, issuedAt: old, nonce: "raw-\(UUID())")) }
        for body in bodies {
            let answer = try await setup.signIn.signIn(body)
            #expect(answer.status == 409 && answer.reason == "stale_identity_token", "\(answer.text)")
        }
        #expect(try await Self.row(setup, sub) == before, "nothing changed")
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 1, "only the first sign-in's token")
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)' AND state IN ('available', 'running', 'retryable')
            """) == 1, "the purge still waits")
    }

    @Test(arguments: ["code", "token"])
    func aTokenFromBeforeAPurgeRecreatesNothing(_ requires: String) async throws {
        let setup = try await Setup.start(server: ["SIWA_SIGN_IN_REQUIRES": requires])
        try atTestEnd { await setup.stop() }
        let sub = "001.erased.\(requires)"
        _ = try await setup.signedIn(sub)
        let old = Date().addingTimeInterval(-5)
        #expect(try await setup.delete(sub).status == 202)
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait {
            try await setup.database.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = '\(sub)' AND purged_at IS NOT NULL") == 1
        }, "\(worker.log)")
        let before = try await Self.row(setup, sub)

        var withCode = try setup.signIn.appleSignIn(sub: sub, email: "back@privaterelay.appleid.com",
                                                    user: ["name": ["firstName": "Ada", "lastName": "L"]])
        withCode["identity_token"] = try setup.apple.identityToken(sub: sub, audience: ServerHarness.clientID, issuedAt: old,
                                                                  email: "back@privaterelay.appleid.com")
        var bodies = [withCode]
        if requires == "token" { bodies.append(try Self.tokenBody(setup, sub: sub, issuedAt: old)) }
        for body in bodies {
            let answer = try await setup.signIn.signIn(body)
            #expect(answer.status == 409 && answer.reason == "stale_identity_token", "\(answer.text)")
        }
        #expect(try await Self.row(setup, sub) == before, "no account re-created")
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.users WHERE email IS NOT NULL OR given_name IS NOT NULL") == 0,
                "no email or name stored again")
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 0)
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'user.account_restarted'") == 0)
    }

    @Test func eachModeAsksForWhatItSays() async throws {
        for requires in ["code", "code_or_nonce", "token"] {
            let setup = try await Setup.start(server: ["SIWA_SIGN_IN_REQUIRES": requires])
            let sub = "001.mode.\(requires)"
            let now = Date()
            // The identity token alone.
            let alone = try await setup.signIn.signIn(try Self.tokenBody(setup, sub: sub, issuedAt: now))
            switch requires {
            case "code": #expect(alone.status == 400 && alone.reason == "authorization_code_required", "\(alone.text)")
            case "code_or_nonce": #expect(alone.status == 400 && alone.reason == "authorization_code_or_nonce_required", "\(alone.text)")
            default: #expect(alone.status == 200, "\(alone.text)")
            }
            if requires != "token" {
                #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.users") == 0, "\(requires): a refusal writes nothing")
            }
            if requires == "code_or_nonce" {
                // The raw nonce, whose SHA-256 the token carries: accepted. The token's own claim passed as the nonce: refused.
                let good = try await setup.signIn.signIn(try Self.tokenBody(setup, sub: sub, issuedAt: now, nonce: "raw-nonce-1"))
                #expect(good.status == 200, "\(good.text)")
                var echoed = try Self.tokenBody(setup, sub: sub + ".2", issuedAt: now, nonce: "raw-nonce-2")
                echoed["nonce"] = SignInService.hashedNonce("raw-nonce-2")
                let refused = try await setup.signIn.signIn(echoed)
                #expect(refused.status == 400 && refused.reason == "nonce_mismatch", "\(refused.text)")
            }
            // A code: every mode.
            let withCode = try await setup.signIn.signIn(try setup.signIn.appleSignIn(sub: sub + ".code"))
            #expect(withCode.status == 200, "\(requires): \(withCode.text)")
            await setup.stop()
        }
    }

    /// A retried sign-in (the same token and code) gets the first answer
    /// again, but not once the user was revoked since: that token is stale.
    @Test func aRetryAfterARevocationIsStaleToo() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.stop() }
        let sub = "001.retry.stale"
        let body = try setup.signIn.appleSignIn(sub: sub)
        let first = try await setup.signIn.signIn(body)
        #expect(first.status == 200, "\(first.text)")
        #expect(try await setup.signIn.signIn(body).status == 200, "a retry gets the stored answer")
        #expect(try await setup.signIn.server.post(token: setup.signIn.server.notification(
            "consent-revoked", sub: sub, eventTime: Date())).status == 200)
        let after = try await setup.signIn.signIn(body)
        #expect(after.status == 409 && after.reason == "stale_identity_token", "\(after.text)")
    }
}
