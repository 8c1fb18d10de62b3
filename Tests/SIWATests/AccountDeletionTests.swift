import AccountLifecycle
import AccountStore
import AppleSignIn
import AppleSimulator
import Foundation
import NIOHTTP1
import SIWAClient
import Testing

/// In-app account deletion end to end: `DELETE /v1/users/{sub}` on siwa
/// (through SIWAClient),
/// the worker (a real `siwa worker` process) revoking the stored refresh
/// token at the simulator's `/auth/revoke` before erasing it, and what a
/// user who comes back afterwards gets.
@Suite("Account deletion", .testDatabases, .timeLimit(.minutes(10)))
struct AccountDeletionTests {
    struct Setup: Sendable {
        let signIn: SignInTests.Setup
        let worker: WorkerHarness
        var apple: AppleSimulator { signIn.apple }
        var database: TestDatabase { signIn.server.database }

        /// - Parameters: server, worker: more settings for `siwa serve` and the workers.
        static func start(server: [String: String] = [:], worker: [String: String] = [:]) async throws -> Setup {
            let signIn = try await SignInTests.Setup.start(settings: server)
            let worker = try await WorkerHarness.start(
                database: signIn.server.database,
                settings: SignInFixture.settings(signIn.fixture, appleBaseURL: signIn.server.appleServer.baseURL).merging(worker) { $1 })
            return Setup(signIn: signIn, worker: worker)
        }

        func stop() async {
            await worker.stop()
            await signIn.server.stop()
        }

        func delete(_ sub: String) async throws -> ClientAnswer<SIWAClient.Deletion> {
            try await signIn.client().delete(sub)
        }

        func signedIn(_ sub: String) async throws -> (answer: ClientAnswer<SIWAClient.SignedInUser>, refreshToken: String) {
            let before = Set(apple.issuedRefreshTokens)
            let answer = try await signIn.signIn(try signIn.appleSignIn(sub: sub, user: ["name": ["firstName": "Ada", "lastName": "L"]]))
            let issued = Set(apple.issuedRefreshTokens).subtracting(before)
            guard answer.status == 200, let token = issued.first else { throw TestSetupError("sign-in failed: \(answer.text)") }
            return (answer, token)
        }

        func jobState(_ id: Int64) async throws -> [String] {
            try await database.strings("SELECT state FROM siwa.jobs WHERE id = \(id)")
        }
    }

    @Test func deletionRevokesAtAppleThenErasesAndAComebackIsANewAccount() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.stop() }
        let sub = "001.del.0001"
        let (first, refreshToken) = try await setup.signedIn(sub)
        // Claims an Apple Business account's token would have brought (sql/022): erased too.
        try await setup.database.execute("UPDATE siwa.users SET org_id = 'org.1', transfer_sub = 't.1' WHERE apple_sub = '\(sub)'")
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.users WHERE email_verified") == 1)
        // As Apple does, the simulator tells siwa of the revocation.
        setup.apple.setNotificationEndpoint(URL(string: setup.signIn.server.baseURL + "/apple/notifications"))

        let deleted = try await setup.delete(sub)
        #expect(deleted.status == 202 && deleted.value?.status == .deletionScheduled, "\(deleted.text)")
        #expect(deleted.value?.appleRevocation == .scheduled && deleted.value?.appleRevocationUrl == nil)
        let jobID = try #require(deleted.value?.jobId)
        let again = try await setup.delete(sub)
        #expect(again.status == 202 && again.value?.jobId == jobID, "the same job while it is pending")
        // Signing in while the deletion is pending would hand out an account
        // about to be erased. (With a token issued after the deletion: one
        // of its second, Apple's iat being whole seconds, is as old as it.)
        try await Task.sleep(for: .seconds(1.1))
        let during = try await setup.signIn.signIn(try setup.signIn.appleSignIn(sub: sub))
        #expect(during.status == 409 && during.reason == "deletion_in_progress")

        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait { try await setup.jobState(jobID) == ["completed"] }, "\(worker.log)")
        #expect(setup.apple.revokedTokens.contains(refreshToken), "the stored refresh token reached Apple's revoke")
        #expect(!setup.apple.isRefreshTokenLive(refreshToken))
        #expect(setup.apple.lastRevokeForm?["token_type_hint"] == "refresh_token")
        #expect(setup.apple.lastRevokeForm?["client_id"] == ServerHarness.clientID)
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 0)
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.users WHERE apple_sub = '\(sub)' AND status = 'deleted' AND purged_at IS NOT NULL
              AND email IS NULL AND given_name IS NULL AND family_name IS NULL
              AND email_verified IS NULL AND org_id IS NULL AND transfer_sub IS NULL
            """) == 1)
        #expect(try await setup.database.scalar(
            "SELECT count(*) FROM siwa.audit_log WHERE action = 'token.revoked' AND (details->>'apple_status')::int = 200") == 1)
        // The revocation was recorded before the erase.
        #expect(try await setup.database.strings("""
            SELECT action || coalesce(':' || (details->>'step'), '') FROM siwa.audit_log
            WHERE apple_sub = '\(sub)' AND action IN ('token.revoked', 'job.step_completed') ORDER BY seq
            """).prefix(3) == ["token.revoked", "job.step_completed:apple.revoke_tokens", "job.step_completed:siwa.erase_personal_data"])
        #expect(try await setup.worker.wait {
            try await setup.database.scalar(
                "SELECT count(*) FROM siwa.notifications WHERE apple_sub = '\(sub)' AND event_type = 'consent-revoked'") == 2
        }, "Apple's consent-revoked after each revoke (the worker's, and the one of the token the refused sign-in got) is recorded")
        #expect(try await setup.database.scalar(
            "SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)'") == 1, "and adds no purge: the user is deleted")
        let repeated = try await setup.delete(sub)
        #expect(repeated.status == 200 && repeated.value?.status == .deleted && repeated.value?.jobId == jobID,
                "a deletion already carried out schedules nothing new: \(repeated.text)")
        let shown = try #require(try await setup.signIn.lookup(sub).value?.user)
        #expect(shown.purge?.state == .completed && shown.purge?.jobId == jobID)
        #expect(shown.email == nil && shown.status == .deleted)

        // The user comes back: a new account on the same Apple sub (with a
        // token issued after the purge: Apple's iat is whole seconds, and one
        // of the purge's second is as old as it).
        try await Task.sleep(for: .seconds(1.1))
        let comeback = try await setup.signIn.signIn(try setup.signIn.appleSignIn(sub: sub))
        #expect(comeback.status == 200 && comeback.value?.isNewUser == true, "\(comeback.text)")
        #expect(comeback.value?.userId != first.value?.userId)
        #expect(try await setup.database.scalar(
            "SELECT count(*) FROM siwa.audit_log WHERE action = 'user.account_restarted' AND apple_sub = '\(sub)'") == 1)
        // A consent revocation from before the comeback changes nothing.
        let late = try setup.signIn.server.notification("consent-revoked", sub: sub, eventTime: Date().addingTimeInterval(-60))
        #expect(try await setup.signIn.server.post(token: late).status == 200)
        #expect(try await setup.database.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["active"])
        #expect(try await setup.database.scalar(
            "SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)' AND state <> 'completed'") == 0)
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 1)
    }

    /// kill -9 after Apple revoked and before siwa recorded it: the token
    /// row is still there (never erased unrevoked), and the restarted
    /// worker revokes again and finishes.
    @Test func aWorkerKilledAfterTheRevokeStillFinishes() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.stop() }
        let sub = "001.kill.0001"
        let (_, refreshToken) = try await setup.signedIn(sub)
        setup.apple.setRevokeEndpointBehaviour(.stallAfterProcessing)
        let jobID = try #require(try await setup.delete(sub).value?.jobId)

        let first = try setup.worker.startWorker()
        #expect(try await setup.worker.wait(upTo: .seconds(30)) { setup.apple.revokedTokens.contains(refreshToken) })
        await first.kill9()
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 1, "not erased before a recorded revoke")
        #expect(try await setup.database.strings("SELECT email FROM siwa.users WHERE apple_sub = '\(sub)'") == ["user@privaterelay.appleid.com"])

        setup.apple.setRevokeEndpointBehaviour(.normal)
        let second = try setup.worker.startWorker()
        try atTestEnd { await second.kill9() }
        #expect(try await setup.worker.wait { try await setup.jobState(jobID) == ["completed"] }, "\(second.log)")
        #expect(setup.apple.revokedTokens.filter { $0 == refreshToken }.count >= 2, "revoked again after the restart")
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 0)
        #expect(try await setup.database.strings("SELECT coalesce(email, 'erased') FROM siwa.users WHERE apple_sub = '\(sub)'") == ["erased"])
    }

    /// Apple's answers to the purge's revoke: a 500 fails the step (nothing
    /// erased, retried with the job's backoff); a 400 `invalid_grant` (the
    /// token is already dead) counts as revoked, recorded with that status.
    @Test func aRevokeThatFailsIsRetriedAndADeadTokenCountsAsRevoked() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.stop() }
        let sub = "001.revoke.0001"
        let (_, refreshToken) = try await setup.signedIn(sub)
        setup.apple.setRevokeEndpointBehaviour(.status(500))
        let jobID = try #require(try await setup.delete(sub).value?.jobId)
        let worker = try setup.worker.startWorker(["SIWA_JOB_RETRY_BASE_SECONDS": "1"])
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait(upTo: .seconds(30)) {
            try await setup.database.scalar("SELECT count(*) FROM siwa.jobs WHERE id = \(jobID) AND jsonb_array_length(errors) >= 1") == 1
        }, "\(worker.log.suffix(2000))")
        #expect(try await setup.jobState(jobID) != ["completed"])
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 1, "nothing erased before a revoke succeeded")
        #expect(try await setup.database.strings("SELECT email FROM siwa.users WHERE apple_sub = '\(sub)'") == ["user@privaterelay.appleid.com"])

        setup.apple.setRevokeEndpointBehaviour(.status(400, error: "invalid_grant"))
        #expect(try await setup.worker.wait(upTo: .seconds(60)) { try await setup.jobState(jobID) == ["completed"] }, "\(worker.log.suffix(2000))")
        #expect(try await setup.database.strings(
            "SELECT details->>'apple_status' FROM siwa.audit_log WHERE action = 'token.revoked' AND apple_sub = '\(sub)'") == ["400"])
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 0)
        #expect(try await setup.database.strings("SELECT coalesce(email, 'erased') FROM siwa.users WHERE apple_sub = '\(sub)'") == ["erased"])
        #expect(setup.apple.revokeRequests >= 2)
        _ = refreshToken
    }

    /// No token stored (sign-in without a code, where
    /// SIWA_SIGN_IN_REQUIRES=token allows it): the app must send the user to
    /// Apple to revoke by hand.
    @Test func withoutATokenTheAnswerSaysRevokeByHand() async throws {
        let setup = try await Setup.start(server: ["SIWA_SIGN_IN_REQUIRES": "token"])
        try atTestEnd { await setup.stop() }
        let body = ["identity_token": try setup.apple.identityToken(sub: "001.manual.0001", audience: ServerHarness.clientID)]
        let answer = try await setup.signIn.signIn(body)
        #expect(answer.status == 200 && answer.value?.refreshTokenStored == false, "\(answer.text)")
        let deleted = try await setup.delete("001.manual.0001")
        #expect(deleted.status == 202 && deleted.value?.appleRevocation == .manual)
        #expect(deleted.value?.appleRevocationUrl?.hasPrefix("https://") == true)
        #expect(try await setup.delete("001.nobody.0001").status == 404)
    }

    /// `consent-revoked` under `sign_out`: a token-only job revokes and
    /// deletes the tokens; the data stays.
    @Test func consentRevokedUnderSignOutRevokesTheTokensAndKeepsTheData() async throws {
        let setup = try await Setup.start(server: ["SIWA_ON_CONSENT_REVOKED": "sign_out"])
        try atTestEnd { await setup.stop() }
        let sub = "001.signout.0001"
        let (_, refreshToken) = try await setup.signedIn(sub)
        let revoked = try setup.signIn.server.notification("consent-revoked", sub: sub)
        #expect(try await setup.signIn.server.post(token: revoked).status == 200)
        #expect(try await setup.database.scalar(
            "SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)' AND args->>'scope' = 'tokens'") == 1)
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait(upTo: .seconds(30)) {
            try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 0
        }, "\(worker.log)")
        #expect(setup.apple.revokedTokens == [refreshToken])
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.users WHERE apple_sub = '\(sub)' AND status = 'consent_revoked'
              AND purged_at IS NULL AND email IS NOT NULL AND given_name = 'Ada'
            """) == 1)
        #expect(setup.worker.downstream.deliveries.isEmpty, "no purge plan step ran")
        #expect(try await setup.database.scalar("SELECT count(*) FROM app.purge_log") == 0)
    }

    /// The token's key left the ring: siwa cannot revoke it, so the purge
    /// fails at its revocation and erases nothing, until an operator runs
    /// `siwa tokens forget` (audited); then the purge completes, and its
    /// deletion receipt says the revocation is the user's to do (manual).
    @Test func aTokenWhoseKeyIsLostBlocksThePurgeUntilForgotten() async throws {
        let keys = try await ReceiptFixture.make()
        let setup = try await Setup.start(worker: keys.workerSettings)
        try atTestEnd { await setup.stop(); keys.remove() }
        let sub = "001.lost.0001"
        _ = try await setup.signedIn(sub)
        try setup.signIn.fixture.rewriteKeyRing([TokenKeyRing.newKeyLine(id: "k2")])
        let jobID = try #require(try await setup.delete(sub).value?.jobId)
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait(upTo: .seconds(30)) {
            try await setup.database.scalar("""
                SELECT count(*) FROM siwa.jobs WHERE id = \(jobID) AND errors::text LIKE '%cannot be decrypted%'
                """) > 0
        }, "\(worker.log)")
        #expect(try await setup.database.strings("SELECT email FROM siwa.users WHERE apple_sub = '\(sub)'") == ["user@privaterelay.appleid.com"],
                "nothing is erased while a token is unrevoked")
        let forgot = try await runSIWA(["tokens", "forget", sub], environment: setup.worker.settings)
        #expect(forgot.status == 0 && forgot.output.contains("forgotten: 1,"), "\(forgot.output)")
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'token.forgotten' AND apple_sub = '\(sub)'
              AND details->>'key_id' = 'k1' AND details->>'db_user' = 'siwa_worker'
            """) == 1)
        #expect(try await setup.worker.wait { try await setup.jobState(jobID) == ["completed"] }, "\(worker.log)")
        #expect(setup.apple.revokedTokens.isEmpty, "nothing was sent to Apple: the token could not be read")
        #expect(try await setup.database.strings("SELECT coalesce(email, 'erased') FROM siwa.users WHERE apple_sub = '\(sub)'") == ["erased"])
        let receipt = try DeletionReceipt.verify(try #require(try await ReceiptFixture.receipts(in: setup.database, sub: sub).first),
                                                 keys: try ES256KeySet.load(path: keys.jwksFile)).receipt
        #expect(receipt.purge.appleTokenRevocation
                == DeletionReceipt.Revocation(outcome: "manual", tokens: [], forgottenClientIDs: [SignInTests.client]))
    }
}
