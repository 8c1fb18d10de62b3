import AccountStore
import AppleSimulator
import Foundation
import SIWAClient
import Testing

/// The worker's daily validation of stored refresh tokens, against the
/// simulator's `/auth/token` (grant_type=refresh_token), by real
/// `siwa worker` processes.
@Suite("Token validation", .testDatabases, .timeLimit(.minutes(10)))
struct TokenValidationTests {
    /// Signs in `subs` and returns their refresh tokens, by sub.
    static func signIn(_ setup: AccountDeletionTests.Setup, _ subs: [String]) async throws -> [String: String] {
        var tokens: [String: String] = [:]
        for sub in subs { tokens[sub] = try await setup.signedIn(sub).refreshToken }
        return tokens
    }

    static func makeDue(_ setup: AccountDeletionTests.Setup) async throws {
        try await setup.database.execute("UPDATE siwa.apple_tokens SET validate_after = now() - interval '1 second'")
    }

    @Test func eachTokenIsCheckedOncePerPeriodEvenWithTwoWorkersAndARestart() async throws {
        let setup = try await AccountDeletionTests.Setup.start()
        try atTestEnd { await setup.stop() }
        let subs = (0..<6).map { "001.val.000\($0)" }
        let tokens = try await Self.signIn(setup, subs)
        try await Self.makeDue(setup)

        let workers = [try setup.worker.startWorker(), try setup.worker.startWorker()]
        #expect(try await setup.worker.wait(upTo: .seconds(30)) {
            try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens WHERE last_validated_at IS NOT NULL") == subs.count
        }, "\(workers[0].log)")
        for worker in workers { await worker.kill9() }
        // A later sign-in's token, due now: the restarted worker's first
        // claim takes it, with anything else due, in validate_after order
        // (any of the six due again would be asked about before it); once
        // it is checked, the six were not checked again.
        let marker = try await Self.signIn(setup, ["001.val.marker"])
        try await setup.database.execute("""
            UPDATE siwa.apple_tokens SET validate_after = now() - interval '1 second' WHERE last_validated_at IS NULL
            """)
        let restarted = try setup.worker.startWorker()
        try atTestEnd { await restarted.kill9() }
        #expect(try await setup.worker.wait(upTo: .seconds(30)) {
            try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens WHERE last_validated_at IS NULL") == 0
        }, "\(restarted.log)")
        #expect(setup.apple.refreshRequests(for: marker["001.val.marker"] ?? "") == 1)
        for (sub, token) in tokens {
            #expect(setup.apple.refreshRequests(for: token) == 1, "\(sub) was checked \(setup.apple.refreshRequests(for: token)) times")
        }
        // Next check a period (24 h, plus up to a quarter) ahead.
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.apple_tokens
            WHERE validate_after BETWEEN now() + interval '23 hours 59 minutes' AND now() + interval '30 hours 1 minute'
            """) == subs.count + 1)
        // Spread over the period, not all due again at one instant (six
        // draws over a quarter of a day are minutes apart, not a second).
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.apple_tokens
            HAVING max(validate_after) - min(validate_after) > interval '1 minute'
               AND count(DISTINCT validate_after) = count(*)
            """) == subs.count + 1, "the next checks are spread")
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.users WHERE status = 'active'") == subs.count + 1)
    }

    /// SIWA_APPLE_REQUESTS_PER_SECOND caps the worker's calls to Apple in
    /// every second, counted where they arrive (the simulator). The
    /// worker's pacer (TokenValidator's Pacer) starts calls at least 1/cap
    /// apart, with no burst allowance after an idle spell, so a one-second
    /// window [t, t + 1 s) of starts holds at most `cap`. Arrivals are the
    /// starts plus each call's transit and the simulator's own wait for a
    /// thread: on a loaded machine one second's starts landed in the next
    /// second's window (arrivals 3.96, 3.97, 4.08 s after starts 0.5 s
    /// apart), so the bound checked is two seconds' worth, 2 × cap, and the
    /// span of the whole run below is the strict check. Without the cap the
    /// ten would come at once (one batch).
    @Test func theRequestsPerSecondCapHoldsInEverySecond() async throws {
        let cap = 2
        let setup = try await AccountDeletionTests.Setup.start()
        try atTestEnd { await setup.stop() }
        let subs = (0..<10).map { "001.rate.000\($0)" }
        let tokens = try await Self.signIn(setup, subs)
        try await Self.makeDue(setup)
        let worker = try setup.worker.startWorker(["SIWA_APPLE_REQUESTS_PER_SECOND": String(cap)])
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait(upTo: .seconds(60)) {
            try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens WHERE last_validated_at IS NOT NULL") == subs.count
        }, "\(worker.log.suffix(2000))")
        for (sub, token) in tokens {
            #expect(setup.apple.refreshRequests(for: token) == 1, "\(sub) was checked \(setup.apple.refreshRequests(for: token)) times")
        }
        let arrivals = setup.apple.refreshRequestTimes
        try #require(arrivals.count == subs.count, "\(arrivals.count) validation calls")
        // The busiest second: a window that starts at an arrival holds at
        // least as many as any other window.
        let busiest = arrivals.indices.map { i in arrivals[i...].prefix(while: { $0 < arrivals[i] + .seconds(1) }).count }.max() ?? 0
        #expect(busiest <= 2 * cap, "\(busiest) calls within one second, cap \(cap): \(arrivals.map { $0 - arrivals[0] })")
        // And the run as a whole: ten starts span at least 9 / cap seconds;
        // the first call's transit may take up to one spacing of that.
        #expect(arrivals[arrivals.count - 1] - arrivals[0] >= Duration.seconds(1) * (subs.count - 2) / cap,
                "\(arrivals.map { $0 - arrivals[0] })")
    }

    /// Apple's invalid_grant (the user revoked at Apple, or changed their
    /// password) ends the session: the token goes, the user stays active,
    /// nothing is purged, even under the default `purge` consent policy; an
    /// identity token from before it no longer signs the user in.
    @Test func invalidGrantEndsTheSessionAndNeverPurges() async throws {
        let setup = try await AccountDeletionTests.Setup.start()
        try atTestEnd { await setup.stop() }
        let tokens = try await Self.signIn(setup, ["001.gone.0001", "001.kept.0002"])
        let before = try setup.apple.identityToken(sub: "001.gone.0001", audience: ServerHarness.clientID,
                                                  issuedAt: Date().addingTimeInterval(-2))
        setup.apple.revokeRefreshToken(tokens["001.gone.0001"] ?? "")
        try await Self.makeDue(setup)
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait(upTo: .seconds(30)) {
            let validated = try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens WHERE last_validated_at IS NOT NULL")
            let ended = try await setup.database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'token.invalid_grant'")
            return validated == 1 && ended == 1
        }, "\(worker.log)")
        #expect(try await setup.database.strings("SELECT u.apple_sub FROM siwa.apple_tokens JOIN siwa.users AS u ON u.id = user_id")
                == ["001.kept.0002"])
        #expect(try await setup.database.strings("SELECT status FROM siwa.users ORDER BY apple_sub") == ["active", "active"])
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.users WHERE apple_sub = '001.gone.0001' AND purged_at IS NULL AND given_name = 'Ada'
            """) == 1, "the data stays")
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.jobs WHERE kind = 'purge_user'") == 0)
        #expect(try await setup.database.strings("""
            SELECT (details->>'session_ended') || '/' || (details->>'purge') FROM siwa.audit_log WHERE action = 'token.invalid_grant'
            """) == ["true/false"])
        // The app hears `token.invalid_grant` (ask the user to sign in again), not `consent.revoked`.
        #expect(try await setup.database.strings("""
            SELECT string_agg(e.event_type, ',') FROM siwa.audit_log AS a, siwa.app_events_of(a.action, a.details, NULL) AS e
            WHERE a.action = 'token.invalid_grant'
            """) == ["token.invalid_grant"])

        // The session ended: an identity token issued before it is refused...
        var replay = try setup.signIn.appleSignIn(sub: "001.gone.0001")
        replay["identity_token"] = before
        let refused = try await setup.signIn.signIn(replay)
        #expect(refused.status == 409 && refused.reason == "stale_identity_token", "\(refused.text)")
        // ...and a fresh sign-in is the same account, data and all (Apple's iat is whole seconds).
        try await Task.sleep(for: .seconds(1.1))
        let back = try await setup.signIn.signIn(try setup.signIn.appleSignIn(sub: "001.gone.0001"))
        #expect(back.status == 200 && back.value?.isNewUser == false, "\(back.text)")
    }

    /// More invalid_grant answers than SIWA_VALIDATION_INVALID_GRANT_PAUSE_PERCENT
    /// of the last 100: validation pauses (the answer that tripped it ends
    /// no session), says so, and waits for `siwa tokens resume-validation`.
    @Test func tooManyInvalidGrantsPauseValidationUntilAnOperatorResumesIt() async throws {
        let setup = try await AccountDeletionTests.Setup.start()
        try atTestEnd { await setup.stop() }
        let subs = (1...6).map { "001.storm.000\($0)" }
        let tokens = try await Self.signIn(setup, subs)
        let admin = try await Self.adminURL(setup.database)
        let notPaused = try await runSIWA(["tokens", "resume-validation"], environment: ["SIWA_DATABASE_URL": admin])
        #expect(notPaused.status == 0 && notPaused.output.contains("not paused"), "\(notPaused.output)")
        for sub in subs { setup.apple.revokeRefreshToken(tokens[sub] ?? "") }
        try await Self.makeDue(setup)
        let worker = try setup.worker.startWorker(["SIWA_VALIDATION_INVALID_GRANT_PAUSE_PERCENT": "2"])
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait(upTo: .seconds(30)) {
            try await setup.database.scalar("SELECT count(*) FROM siwa.token_validation_pause WHERE paused_at IS NOT NULL") == 1
        }, "\(worker.log)")
        #expect(try await setup.worker.wait(upTo: .seconds(10)) { worker.log.contains("Token validation is paused") }, "\(worker.log)")
        // Two sessions ended; the third answer tripped the pause and ended none.
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'token.invalid_grant'") == 2)
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 4)
        #expect(try await setup.database.strings("""
            SELECT details->>'invalid_grant_of_last_100' FROM siwa.audit_log WHERE action = 'token_validation.paused'
            """) == ["3"])
        // Nothing more is validated while paused. No event marks a call
        // not made: a worker that ignored the pause would claim the
        // postponed tokens again at once (they are due now), well within
        // this settle.
        let calls = setup.apple.tokenRequests
        try await Task.sleep(for: .seconds(3))
        #expect(setup.apple.tokenRequests == calls)

        // An operator resumes it, as their own role (a member of siwa_admin).
        let resumed = try await runSIWA(["tokens", "resume-validation"], environment: ["SIWA_DATABASE_URL": admin])
        #expect(resumed.status == 0 && resumed.output.contains("token validation resumed"), "\(resumed.output)")
        #expect(try await setup.database.strings("""
            SELECT details->>'db_user' FROM siwa.audit_log WHERE action = 'token_validation.resumed'
            """) == [Self.adminRole])
        // Validation goes on, counting afresh (and trips again on this storm).
        #expect(try await setup.worker.wait(upTo: .seconds(30)) {
            try await setup.database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'token.invalid_grant'") > 2
        }, "\(worker.log)")
        // The runtime role cannot resume it: only an admin's function call can.
        #expect(try await LeastPrivilegeTests.sqlState(of: "SELECT siwa.resume_token_validation()",
                                                       on: try setup.database.runtimeConfiguration) == "42501")
    }

    static let adminRole = "siwa_test_admin"

    /// A login role in siwa_admin (cluster-wide, made once), connected to `database`.
    static func adminURL(_ database: TestDatabase) async throws -> String {
        try await APIKeysTests.loginURL(adminRole, in: "siwa_admin", for: database)
    }

    @Test func appleUnavailableLeavesTheUserAloneAndRetries() async throws {
        let setup = try await AccountDeletionTests.Setup.start()
        try atTestEnd { await setup.stop() }
        let tokens = try await Self.signIn(setup, ["001.later.0001"])
        setup.apple.setTokenEndpointBehaviour(.status(500))
        try await Self.makeDue(setup)
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait(upTo: .seconds(30)) {
            try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens WHERE validation_failures = 1") == 1
        }, "\(worker.log)")
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.apple_tokens WHERE last_validated_at IS NULL
              AND validate_after BETWEEN now() + interval '30 seconds' AND now() + interval '2 minutes'
            """) == 1, "retried after a minute, not a day")
        #expect(try await setup.database.strings("SELECT status FROM siwa.users") == ["active"])
        #expect(setup.apple.isRefreshTokenLive(tokens["001.later.0001"] ?? ""))

        // `siwa tokens validate` once Apple is back (not due yet: --force).
        setup.apple.setTokenEndpointBehaviour(.normal)
        let env = setup.worker.settings
        let refused = try await runSIWA(["tokens", "validate", "001.later.0001"], environment: env)
        #expect(refused.status == 0 && refused.output.contains("no token of 001.later.0001 is due"), "\(refused.output)")
        let forced = try await runSIWA(["tokens", "validate", "001.later.0001", "--force"], environment: env)
        #expect(forced.status == 0 && forced.output.contains("\(ServerHarness.clientID): valid"), "\(forced.output)")
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens WHERE last_validated_at IS NOT NULL") == 1)
    }

    /// Apple refuses siwa's own credentials (invalid_client): one call, then
    /// validation pauses for ten minutes; the users and their tokens stay as
    /// they are, and the refusal is counted.
    @Test func invalidClientPausesValidationAndTouchesNoUser() async throws {
        let setup = try await AccountDeletionTests.Setup.start()
        try atTestEnd { await setup.stop() }
        let tokens = try await Self.signIn(setup, ["001.cred.0001", "001.cred.0002", "001.cred.0003"])
        let before = setup.apple.tokenRequests
        setup.apple.setTokenEndpointBehaviour(.status(400, error: "invalid_client"))
        try await Self.makeDue(setup)
        let port = try freePort()
        // One call a second: the first refusal stops the batch before the next call.
        let worker = try setup.worker.startWorker(["SIWA_APPLE_REQUESTS_PER_SECOND": "1", "SIWA_WORKER_METRICS_PORT": String(port)])
        try atTestEnd { await worker.kill9() }
        try await worker.waitForLog("invalid_client")
        // Long enough for a worker that did not pause to make its next calls
        // (one a second): no event marks a call not made.
        try await Task.sleep(for: .seconds(3))
        #expect(setup.apple.tokenRequests - before == 1, "one call, then the pause: \(setup.apple.tokenRequests - before)")
        // The refused token is due again after the pause; the others were
        // never asked about; none counts as a failed validation.
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.apple_tokens
            WHERE validate_after BETWEEN now() + interval '9 minutes' AND now() + interval '11 minutes'
            """) == 1)
        #expect(try await setup.database.scalar(
            "SELECT count(*) FROM siwa.apple_tokens WHERE last_validated_at IS NULL AND validation_failures = 0") == tokens.count)
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.users WHERE status = 'active'") == tokens.count)
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'token.invalid_grant'") == 0)
        for token in tokens.values { #expect(setup.apple.isRefreshTokenLive(token)) }
        let metrics = try await PrometheusText.scrape("http://127.0.0.1:\(port)")
        #expect(metrics.value("siwa_token_validations_total", ["outcome": "invalid_client"]) == 1, "\(metrics.text)")
    }
}
