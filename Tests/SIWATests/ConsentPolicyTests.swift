import AccountLifecycle
import Foundation
import SIWAClient
import Testing

/// `SIWA_ON_CONSENT_REVOKED`: by default (`purge`, as TN3194 asks) a revoked
/// consent signs the user out and revokes their Apple tokens at once, and
/// purges their data after the grace delay unless they sign in again;
/// `sign_out` keeps the data. An account deletion always purges at once.
@Suite("Consent policy", .testDatabases, .timeLimit(.minutes(10)))
struct ConsentPolicyTests {
    typealias Setup = AccountDeletionTests.Setup

    /// A signed-in user (tokens stored, name kept) whose consent Apple then revoked.
    static func revoked(_ setup: Setup, _ sub: String) async throws -> (refreshToken: String, revokedAt: Date) {
        let (_, refreshToken) = try await setup.signedIn(sub)
        // After the sign-in (its token's iat is whole seconds, at or before
        // now): an older revocation would be ignored as stale.
        let revokedAt = Date()
        let answer = try await setup.signIn.server.post(token: setup.signIn.server.notification("consent-revoked", sub: sub,
                                                                                                eventTime: revokedAt))
        #expect(answer.status == 200, "\(answer.text)")
        // Apple's iat is whole seconds: a token issued in the revocation's
        // second would be as old as it. The tests' later sign-ins are newer.
        try await Task.sleep(for: .seconds(1.1))
        return (refreshToken, revokedAt)
    }

    /// The user's pending purge: state, whether it waits, seconds until it runs, the steps done.
    static func purge(_ setup: Setup, _ sub: String) async throws -> [String] {
        try await setup.database.strings("""
            SELECT state || '/' || siwa.purge_waiting(args)::text || '/' || round(extract(epoch FROM run_at - now()) / 86400)::text
                   || '/' || coalesce((SELECT string_agg(k, ',') FROM jsonb_object_keys(steps_done) AS k), '')
            FROM siwa.jobs WHERE kind = 'purge_user' AND args->>'apple_sub' = '\(sub)' ORDER BY id
            """)
    }

    @Test func byDefaultTheTokensGoAtOnceAndTheDataAfterTheDelay() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.stop() }
        let sub = "001.grace.0001"
        let (refreshToken, _) = try await Self.revoked(setup, sub)
        #expect(try await setup.database.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["consent_revoked"])
        // Enqueued to run now (the tokens), due in 30 days (the data).
        #expect(try await setup.database.strings("""
            SELECT state || '/' || (round(extract(epoch FROM (args->>'purge_after')::timestamptz - now()) / 86400))::text
            FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)'
            """) == ["available/30"])

        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        // The first run revokes the tokens at Apple and deletes them, then waits.
        #expect(try await setup.worker.wait {
            try await Self.purge(setup, sub) == ["available/true/30/apple.revoke_tokens"]
        }, "\(worker.log)")
        #expect(setup.apple.revokedTokens.contains(refreshToken))
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 0)
        // The data stays while the purge waits; the app sees when it runs.
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.users WHERE apple_sub = '\(sub)' AND email IS NOT NULL AND given_name = 'Ada' AND purged_at IS NULL
            """) == 1)
        let shown = try await setup.signIn.lookup(sub)
        let purge = try #require(shown.value?.user?.purge, "\(shown.text)")
        #expect(purge.waiting && purge.state == .available, "\(shown.text)")
        let runAt = try #require(purge.runAt)
        #expect(abs(runAt.timeIntervalSinceNow - 30 * 86400) < 600, "\(shown.text)")
        // Not late: the SLA counts from the due time.
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.attention") == 0)

        // Thirty days on (moved here by hand), the purge runs its plan.
        try await setup.database.execute("""
            UPDATE siwa.jobs SET args = jsonb_set(args, '{purge_after}', to_jsonb(siwa.utc_iso(now() - interval '1 second'))),
                                 run_at = now()
            WHERE args->>'apple_sub' = '\(sub)'
            """)
        #expect(try await setup.worker.wait {
            try await setup.database.scalar("""
                SELECT count(*) FROM siwa.users WHERE apple_sub = '\(sub)' AND purged_at IS NOT NULL AND email IS NULL AND given_name IS NULL
                """) == 1
        }, "\(worker.log)")
        #expect(try await setup.worker.wait {
            try await setup.database.strings("""
                SELECT state || '/' || (SELECT count(*) FROM jsonb_object_keys(steps_done))::text FROM siwa.jobs
                WHERE args->>'apple_sub' = '\(sub)'
                """) == ["completed/4"]
        }, "the revocation, the built-in erase and the plan's two steps")
        // Each attempt's claim was audited; the wait too.
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'job.snoozed' AND apple_sub = '\(sub)'") == 1)
    }

    @Test func aSignInBeforeThePurgeCancelsItButAnOldTokenDoesNot() async throws {
        let hook = try await AppWebhookHarness.start()
        let setup = try await Setup.start(worker: hook.settings())
        try atTestEnd { await setup.stop() }
        // As a worker with SIWA_APP_WEBHOOK_URL started earlier leaves it.
        try await setup.database.execute("UPDATE siwa.app_webhook SET enabled = true")
        let sub = "001.back.0001"
        let oldToken = try setup.apple.identityToken(sub: sub, audience: ServerHarness.clientID, issuedAt: Date().addingTimeInterval(-5))
        _ = try await Self.revoked(setup, sub)
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait { try await Self.purge(setup, sub) == ["available/true/30/apple.revoke_tokens"] },
                "\(worker.log)")

        // An identity token from before the revocation, with a fresh code: refused, nothing changes.
        var replay = try setup.signIn.appleSignIn(sub: sub)
        replay["identity_token"] = oldToken
        let refused = try await setup.signIn.signIn(replay)
        #expect(refused.status == 409 && refused.reason == "stale_identity_token", "\(refused.text)")
        #expect(try await setup.database.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["consent_revoked"])
        #expect(try await Self.purge(setup, sub) == ["available/true/30/apple.revoke_tokens"])
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 0, "the code's token was not kept")

        // The user comes back: the purge is cancelled, the account and its data stay.
        let back = try await setup.signIn.signIn(try setup.signIn.appleSignIn(sub: sub))
        #expect(back.status == 200 && back.value?.isNewUser == false && back.value?.status == .active,
                "\(back.text)")
        #expect(try await setup.database.strings("SELECT state FROM siwa.jobs WHERE kind = 'purge_user' AND args->>'apple_sub' = '\(sub)'") == ["cancelled"])
        #expect(try await setup.database.strings("""
            SELECT details->>'reason' FROM siwa.audit_log WHERE action = 'purge.cancelled' AND apple_sub = '\(sub)'
            """) == ["signed_in_again"])
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.users WHERE apple_sub = '\(sub)' AND given_name = 'Ada' AND purged_at IS NULL
            """) == 1)
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 1)
        // The app hears of it: the worker delivers a signed purge.cancelled,
        // naming the cancelled job, which SIWAClient reads.
        #expect(try await setup.database.strings("SELECT event_type FROM siwa.app_events_of('purge.cancelled', '{}', NULL)")
                == ["purge.cancelled"])
        #expect(try await eventually(upTo: .seconds(40)) { hook.accepted(sub: sub).contains { $0.type == "purge.cancelled" } },
                "\(hook.receiver.deliveries.map { "\($0.sub) \($0.type)" }) \(worker.log.suffix(3000))")
        let cancelled = try hook.event(try #require(hook.accepted(sub: sub).first { $0.type == "purge.cancelled" }))
        let cancelledJob = try await setup.database.scalar("SELECT id FROM siwa.jobs WHERE kind = 'purge_user' AND args->>'apple_sub' = '\(sub)'")
        #expect(cancelled.kind == .purgeCancelled && cancelled.data.sub == sub && cancelled.data.reason == "signed_in_again"
                && cancelled.data.jobID == Int64(cancelledJob), "\(cancelled.data)")
        let shown = try await setup.signIn.lookup(sub)
        #expect(shown.value?.user?.purge?.state == .cancelled, "\(shown.text)")
    }

    /// A sign-in before the waiting job's first run (the tokens not revoked
    /// yet): the purge is cancelled, and a sign-out takes over the tokens
    /// stored before the sign-in (of the app's other client ids; the
    /// sign-in's own client's old token is replaced in its row, and was
    /// dead at Apple since the revocation).
    @Test func aSignInBeforeTheFirstRunLeavesTheOldTokensToASignOut() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.stop() }
        let sub = "001.early.0001"
        _ = try await Self.revoked(setup, sub)
        let before = Set(setup.apple.issuedRefreshTokens)
        let back = try await setup.signIn.signIn(try setup.signIn.appleSignIn(sub: sub))
        #expect(back.status == 200, "\(back.text)")
        let newRefresh = try #require(Set(setup.apple.issuedRefreshTokens).subtracting(before).first)
        #expect(try await setup.database.strings("""
            SELECT state || '/' || coalesce(args->>'scope', 'all') FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)' ORDER BY id
            """) == ["cancelled/all", "available/tokens"])
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait {
            try await setup.database.strings("SELECT state FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)' ORDER BY id")
                == ["cancelled", "completed"]
        }, "\(worker.log)")
        // The new sign-in's token is kept: it was stored after the sign-out's cut-off.
        #expect(!setup.apple.revokedTokens.contains(newRefresh))
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 1)
        #expect(try await setup.database.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["active"])
    }

    /// An account deletion, at Apple or in the app, does not wait.
    @Test(arguments: ["apple", "app"])
    func aDeletionEndsTheWait(_ source: String) async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.stop() }
        let sub = "001.nowait.\(source)"
        _ = try await Self.revoked(setup, sub)
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait { try await Self.purge(setup, sub) == ["available/true/30/apple.revoke_tokens"] },
                "\(worker.log)")
        if source == "apple" {
            #expect(try await setup.signIn.server.post(token: setup.signIn.server.notification("account-delete", sub: sub)).status == 200)
        } else {
            #expect(try await setup.delete(sub).status == 202)
        }
        #expect(try await setup.worker.wait {
            try await setup.database.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = '\(sub)' AND purged_at IS NOT NULL") == 1
        }, "\(worker.log)")
        // The plan's steps after the erase finish the job.
        #expect(try await setup.worker.wait {
            try await setup.database.strings("SELECT state FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)'") == ["completed"]
        }, "\(worker.log)")
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'job.wait_ended' AND apple_sub = '\(sub)'
            """) == 1)
        // The latency is measured from the wait's end, not from the revocation's request.
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.purge_latency WHERE apple_sub = '\(sub)' AND state = 'completed' AND seconds < 120
            """) == 1)
    }

    @Test func aDelayOfZeroPurgesAtOnce() async throws {
        let siwa = try await ServerHarness.start(settings: ["SIWA_CONSENT_REVOKED_PURGE_DELAY_DAYS": "0"])
        try atTestEnd { await siwa.stop() }
        let sub = "purged.\(UUID().uuidString)"
        #expect(try await siwa.post(token: siwa.notification("consent-revoked", sub: sub)).status == 200)
        #expect(try await siwa.database.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["consent_revoked"])
        #expect(try await siwa.database.strings("""
            SELECT args->>'event_type' || '/' || state || '/' || (args ? 'purge_after')::text FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)'
            """) == ["consent-revoked/available/false"])
        #expect(try await siwa.database.strings("""
            SELECT details->>'purge' FROM siwa.audit_log WHERE action = 'notification.recorded' AND apple_sub = '\(sub)'
            """) == ["true"])
    }

    @Test func signOutKeepsTheUsersData() async throws {
        let siwa = try await ServerHarness.start(settings: ["SIWA_ON_CONSENT_REVOKED": "sign_out"])
        try atTestEnd { await siwa.stop() }
        let db = siwa.database
        let sub = "signout.\(UUID().uuidString)"
        let t0 = Date().addingTimeInterval(-60)
        #expect(try await siwa.post(token: siwa.notification("email-enabled", sub: sub, eventTime: t0,
                                                             email: "kept@privaterelay.appleid.com")).status == 200)
        let answer = try await siwa.post(token: siwa.notification("consent-revoked", sub: sub, eventTime: t0.addingTimeInterval(1)))
        #expect(answer.status == 200)
        #expect(answer.json["status"] as? String == "recorded")

        // Signed out, not a tombstone: the status changes, the data stays, no purge.
        #expect(try await db.strings("SELECT status || '/' || (email IS NOT NULL)::text FROM siwa.users WHERE apple_sub = '\(sub)'")
                == ["consent_revoked/true"])
        #expect(try await db.scalar("SELECT count(*) FROM siwa.jobs") == 0)
        #expect(try await db.strings("SELECT event_type FROM siwa.notifications WHERE apple_sub = '\(sub)' ORDER BY id")
                == ["email-enabled", "consent-revoked"])
        #expect(try await db.strings("""
            SELECT details->>'purge' FROM siwa.audit_log
            WHERE action = 'notification.recorded' AND apple_sub = '\(sub)' AND details->>'event_type' = 'consent-revoked'
            """) == ["false"])

        // A later account deletion still purges.
        #expect(try await siwa.post(token: siwa.notification("account-deleted", sub: sub)).status == 200)
        #expect(try await db.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["deleted"])
        #expect(try await db.strings("SELECT args->>'event_type' FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)'") == ["account-deleted"])
    }

    @Test func aMisspelledPolicyStopsStartUpWithOneLine() async throws {
        let result = try await runSIWA(["serve"], environment: [
            "SIWA_DATABASE_URL": "postgres://u@127.0.0.1:9/x", "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "app", "SIWA_ON_CONSENT_REVOKED": "delete",
        ])
        #expect(result.status == 2)
        #expect(result.output == "siwa: SIWA_ON_CONSENT_REVOKED: expected one of purge, sign_out, got 'delete'\n", "\(result.output)")
    }
}
