import AccountStore
import AppleSimulator
import Foundation
import Testing

/// `siwa worker` as a real process against real PostgreSQL and a real HTTP
/// downstream: notifications in, purges out, audited.
@Suite("Worker", .testDatabases, .timeLimit(.minutes(10)))
struct WorkerTests {
    /// Notifications through HTTP -> jobs -> `siwa worker` -> the app's rows
    /// gone, the downstream got a correctly signed request, audit rows written.
    @Test func notificationsToPurgesEndToEnd() async throws {
        let siwa = try await ServerHarness.start(settings: ["SIWA_ON_CONSENT_REVOKED": "purge", "SIWA_CONSENT_REVOKED_PURGE_DELAY_DAYS": "0"])
        try atTestEnd { await siwa.stop() }
        // The app's analytics live in a database of their own.
        let analytics = try await TestDatabase.create()
        // public, not unqualified: the owner role is named siwa, so its search_path ("$user", public) starts with schema siwa.
        try await analytics.execute("CREATE TABLE public.events (apple_sub text NOT NULL, kind text)")
        let harness = try await WorkerHarness.start(database: siwa.database, analytics: analytics)
        try atTestEnd { await harness.stop() }
        let db = siwa.database
        let revoked = "e2e.revoked.\(UUID().uuidString)"
        let deleted = "e2e.deleted.\(UUID().uuidString)"
        let bystander = "e2e.kept.\(UUID().uuidString)"
        let t0 = Date().addingTimeInterval(-60)
        for sub in [revoked, bystander] {
            #expect(try await siwa.post(token: siwa.notification("email-enabled", sub: sub, eventTime: t0, email: "\(sub)@privaterelay.appleid.com")).status == 200)
        }
        try await db.execute("""
            INSERT INTO app.profiles (apple_sub, display_name) VALUES
              ('\(revoked)', 'R'), ('\(revoked)', 'R2'), ('\(deleted)', 'D'), ('\(bystander)', 'K');
            """)
        try await analytics.execute("""
            INSERT INTO events (apple_sub, kind) VALUES ('\(revoked)', 'open'), ('\(deleted)', 'open'), ('\(bystander)', 'open');
            """)
        #expect(try await siwa.post(token: siwa.notification("consent-revoked", sub: revoked, eventTime: t0.addingTimeInterval(1))).status == 200)
        #expect(try await siwa.post(token: siwa.notification("account-delete", sub: deleted)).status == 200)

        let worker = try harness.startWorker()
        let done = try await harness.wait { try await harness.count(state: "completed") == 2 }
        #expect(done, "jobs not completed: \(worker.log.suffix(3000))")

        // The app's data for the two users is gone, the bystander's is not,
        // in siwa's database and in the other one.
        #expect(try await db.strings("SELECT apple_sub FROM app.profiles") == [bystander])
        #expect(try await analytics.strings("SELECT apple_sub FROM events") == [bystander])
        #expect(try await db.scalar("SELECT count(*) FROM app.purge_log") == 2)
        // $2 is siwa's user id, $3 the sub's team.
        #expect(try await db.scalar("""
            SELECT count(*) FROM app.purge_log p
            JOIN siwa.users u ON u.apple_sub = p.apple_sub AND u.id = p.siwa_user_id AND u.apple_team = p.apple_team
            """) == 2)
        // siwa's own personal data is erased; the tombstones keep sub and status.
        #expect(try await db.strings("SELECT status || '/' || (email IS NULL)::text FROM siwa.users WHERE apple_sub = '\(revoked)'")
                == ["consent_revoked/true"])
        #expect(try await db.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(deleted)'") == ["deleted"])
        #expect(try await db.scalar("SELECT count(*) FROM siwa.notifications WHERE apple_sub = '\(revoked)' AND claims::text LIKE '%@%'") == 0)
        #expect(try await db.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = '\(bystander)' AND email IS NOT NULL") == 1)

        // The downstream saw one signed delivery per job, with the documented body.
        let deliveries = harness.downstream.deliveries
        #expect(deliveries.count == 2)
        #expect(deliveries.allSatisfy { $0.signatureValid && $0.accepted })
        let bySub = Dictionary(deliveries.map { ($0.fields["apple_sub"] as? String ?? "", $0) }) { first, _ in first }
        let revokedJob = try await db.scalar("SELECT id FROM siwa.jobs WHERE args->>'apple_sub' = '\(revoked)'")
        #expect(bySub[revoked]?.fields["event_type"] as? String == "consent-revoked")
        #expect(bySub[revoked]?.fields["job_id"] as? Int == revokedJob)
        #expect(bySub[revoked]?.webhookID == "siwa-job-\(revokedJob)-\(WorkerHarness.httpStep)")
        #expect(bySub[deleted]?.fields["event_type"] as? String == "account-delete")
        #expect(bySub[deleted]?.fields.keys.sorted() == ["apple_sub", "apple_team", "event_type", "job_id", "user_id"])
        #expect(bySub[deleted]?.fields["apple_team"] as? String == TestEnvironment.team)

        // Audit: claim, four steps, completion, per job; no personal data.
        let actions = try await db.strings("""
            SELECT action FROM siwa.audit_log WHERE actor = 'worker' AND details->>'job_id' = '\(revokedJob)' ORDER BY seq
            """)
        #expect(actions == ["job.claimed"] + Array(repeating: "job.step_completed", count: 4) + ["job.completed"])
        #expect(try await db.strings("""
            SELECT details->>'step' FROM siwa.audit_log WHERE action = 'job.step_completed' AND details->>'job_id' = '\(revokedJob)' ORDER BY seq
            """) == ["siwa.erase_personal_data", WorkerHarness.sqlStep, WorkerHarness.analyticsStep, WorkerHarness.httpStep])
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE details::text LIKE '%@%'") == 0)
        #expect(!worker.log.contains("@privaterelay"))

        #expect(await worker.terminate() == 0)
    }

    /// A downstream that fails twice, then succeeds: retried with backoff
    /// (retry n waits at least base x 2^(n-1)), completed on attempt 3.
    @Test func downstreamFailingTwiceIsRetriedWithBackoff() async throws {
        let harness = try await WorkerHarness.start(settings: ["SIWA_JOB_RETRY_BASE_SECONDS": "0.4"])
        try atTestEnd { await harness.stop() }
        harness.downstream.set(.failFirst(2))
        try await harness.enqueue(subs: ["flaky"])
        let worker = try harness.startWorker()
        let done = try await harness.wait { try await harness.count(state: "completed") == 1 }
        #expect(done, "\(worker.log.suffix(3000))")
        let deliveries = harness.downstream.deliveries
        #expect(deliveries.map(\.accepted) == [false, false, true])
        #expect(Set(deliveries.map(\.webhookID)).count == 1)
        if deliveries.count == 3 {
            // Delivery times are in whole-second timestamps on the wire; use
            // the stub's own clock. Allow 50 ms for clock granularity.
            #expect(deliveries[1].receivedAt.timeIntervalSince(deliveries[0].receivedAt) >= 0.35)
            #expect(deliveries[2].receivedAt.timeIntervalSince(deliveries[1].receivedAt) >= 0.75)
        }
        let db = harness.database
        #expect(try await db.scalar("SELECT attempt FROM siwa.jobs") == 3)
        #expect(try await db.scalar("SELECT jsonb_array_length(errors) FROM siwa.jobs") == 2)
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'job.retry_scheduled'") == 2)
        // The SQL step ran once: the retry skipped it.
        #expect(try await db.scalar("SELECT count(*) FROM app.purge_log") == 1)
        #expect(await worker.terminate() == 0)
    }

    /// A downstream that always fails: discarded after the configured
    /// attempts, with its history; `siwa jobs list --state discarded` shows
    /// it; `siwa jobs retry` brings it back, and it completes.
    @Test func alwaysFailingJobIsDiscardedAndCanBeRetried() async throws {
        let harness = try await WorkerHarness.start(settings: ["SIWA_JOB_MAX_ATTEMPTS": "3"])
        try atTestEnd { await harness.stop() }
        harness.downstream.set(.alwaysFail)
        try await harness.enqueue(subs: ["doomed"])
        let worker = try harness.startWorker()
        let discarded = try await harness.wait { try await harness.count(state: "discarded") == 1 }
        #expect(discarded, "\(worker.log.suffix(3000))")
        let db = harness.database
        let id = try await db.scalar("SELECT id FROM siwa.jobs")
        #expect(try await db.scalar("SELECT jsonb_array_length(errors) FROM siwa.jobs") == 3)
        #expect(try await db.strings("SELECT errors->2->>'error' FROM siwa.jobs").first?.contains("HTTP 500") == true)
        #expect(harness.downstream.deliveries.count == 3)
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'job.discarded'") == 1)

        let list = try await runSIWA(["jobs", "list", "--state", "discarded"], environment: harness.settings)
        #expect(list.status == 0)
        let row = list.output.split(separator: "\n").first { $0.hasPrefix("\(id) ") }
        #expect(row?.contains(" purge_user ") == true && row?.contains(" discarded ") == true
                && row?.contains("notify-crm: 127.0.0.1 answered HTTP 500") == true, "\(list.output)")
        #expect(list.output.contains(" KIND "), "\(list.output)")
        let json = try await runSIWA(["jobs", "list", "--state", "discarded", "--json"], environment: harness.settings)
        let jobs = try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [[String: Any]]
        #expect(jobs?.first?["id"] as? Int == id)
        #expect((jobs?.first?["errors"] as? [Any])?.count == 3)

        // With the worker stopped, a newer purge for the same user is pending:
        // retrying the old one is refused with the reason, not a crash. An
        // admin's own role changes jobs (the service's may not: sql/017).
        #expect(await worker.terminate() == 0)
        let admin = ["SIWA_DATABASE_URL": try await APIKeysTests.loginURL("siwa_test_worker_admin", in: "siwa_admin", for: db)]
        try await db.execute("INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{\"apple_sub\": \"doomed\", \"apple_team\": \"TEAM123456\"}')")
        let newer = try await db.scalar("SELECT max(id) FROM siwa.jobs")
        let refused = try await runSIWA(["jobs", "retry", String(id)], environment: admin)
        #expect(refused.status == 1)
        #expect(refused.output.contains("another purge for the same Apple user is already pending"), "\(refused.output)")
        #expect(try await runSIWA(["jobs", "cancel", String(newer)], environment: admin).status == 0)
        #expect(try await db.strings("SELECT state FROM siwa.jobs WHERE id = \(newer)") == ["cancelled"])

        harness.downstream.set(.succeed)
        let retry = try await runSIWA(["jobs", "retry", String(id)], environment: admin)
        #expect(retry.status == 0, "\(retry.output)")
        let restarted = try harness.startWorker()
        let completed = try await harness.wait { try await harness.count(state: "completed") == 1 }
        #expect(completed, "\(restarted.log.suffix(3000))")
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE actor = 'admin' AND action = 'job.retry'") == 1)
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE actor = 'admin' AND action = 'job.cancel'") == 1)
        // Completed jobs cannot be retried; unknown ids are refused.
        #expect(try await runSIWA(["jobs", "retry", String(id)], environment: admin).status == 1)
        #expect(try await runSIWA(["jobs", "cancel", "999999"], environment: admin).status == 1)
        #expect(await restarted.terminate() == 0)
    }

    /// A statement that fails while it runs, after PostgreSQL has described
    /// its rows (here a division by zero in a SELECT on another database),
    /// fails the step: it is not swallowed by the COMMIT (which PostgreSQL
    /// answers with a quiet ROLLBACK) and recorded as done.
    @Test func aStatementFailingMidwayOnAnotherDatabaseFailsTheStep() async throws {
        let analytics = try await TestDatabase.create()
        try await analytics.execute("CREATE TABLE events (apple_sub text NOT NULL)")
        try await analytics.execute("INSERT INTO events VALUES ('midway'), ('other')")
        let harness = try await WorkerHarness.start(analytics: analytics, planSteps: { _ in [
            ["name": WorkerHarness.analyticsStep, "database_url_env": "TEST_ANALYTICS_DATABASE_URL",
             "sql": ["DELETE FROM events WHERE apple_sub = $1", "SELECT 1 / (count(*) - count(*)) FROM events"]],
        ] }, settings: ["SIWA_JOB_MAX_ATTEMPTS": "1"])
        try atTestEnd { await harness.stop() }
        try await harness.enqueue(subs: ["midway"])
        let worker = try harness.startWorker()
        let discarded = try await harness.wait(upTo: .seconds(30)) { try await harness.count(state: "discarded") == 1 }
        #expect(discarded, "\(worker.log.suffix(3000))")
        let db = harness.database
        #expect(try await db.strings("SELECT errors->0->>'error' FROM siwa.jobs") == ["SQL failed, sqlstate 22012: division by zero"])
        #expect(try await db.scalar("SELECT count(*) FROM siwa.jobs WHERE steps_done ? '\(WorkerHarness.analyticsStep)'") == 0)
        // The step's transaction was rolled back whole.
        #expect(try await analytics.scalar("SELECT count(*) FROM events") == 2)
        #expect(await worker.terminate() == 0)
    }

    /// Two worker processes at once: every job is claimed exactly once (no
    /// crash here, so no job is ever taken twice), both take a share, and
    /// each SQL step and delivery happens once.
    @Test func twoWorkersNeverRunTheSameJob() async throws {
        let harness = try await WorkerHarness.start(slowSQL: 0.01)
        try atTestEnd { await harness.stop() }
        let subs = (0..<200).map { "pair.\($0)" }
        try await harness.enqueue(subs: subs)
        let first = try harness.startWorker()
        let second = try harness.startWorker()
        let done = try await harness.wait { try await harness.count(state: "completed") == subs.count }
        #expect(done, "\(first.log.suffix(2000))\n\(second.log.suffix(2000))")
        let db = harness.database
        #expect(try await db.scalar("""
            SELECT count(*) FROM (SELECT details->>'job_id' FROM siwa.audit_log WHERE action = 'job.claimed'
                                  GROUP BY 1 HAVING count(*) <> 1) AS twice
            """) == 0)
        #expect(try await db.scalar("SELECT count(DISTINCT split_part(details->>'worker', '/', 1)) FROM siwa.audit_log WHERE action = 'job.claimed'") == 2)
        #expect(try await db.scalar("SELECT count(*) FROM app.purge_log") == subs.count)
        #expect(harness.downstream.deliveries.count == subs.count)
        #expect(Set(harness.downstream.deliveries.map(\.webhookID)).count == subs.count)
        #expect(await first.terminate() == 0)
        #expect(await second.terminate() == 0)
    }

    /// An idle worker starts a job as soon as it is enqueued: the insert's
    /// NOTIFY wakes it (JobNotifier), not its poll, which is 30 s here. Each
    /// of ten jobs, enqueued one at a time, is claimed within a second (on a
    /// quiet machine, a few milliseconds: make bench's wake-up figure).
    @Test func anEnqueuedJobWakesAnIdleWorkerAtOnce() async throws {
        let harness = try await WorkerHarness.start(planSteps: { _ in [] }, settings: ["SIWA_WORKER_POLL_SECONDS": "30"])
        try atTestEnd { await harness.stop() }
        let worker = try harness.startWorker()
        try await worker.waitForLog("Worker started")
        let db = harness.database
        // Its LISTEN in place: from now on an insert wakes it (its first
        // claim, which LISTEN starting triggers, finds nothing).
        #expect(try await harness.wait(upTo: .seconds(30)) { try await db.jobListeners() == 1 }, "\(worker.log.suffix(2000))")
        for sample in 0..<10 {
            try await db.execute("INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', jsonb_build_object('apple_sub', 'wake.\(sample)', 'apple_team', 'TEAM123456'))")
            let done = try await harness.wait(upTo: .seconds(10)) { try await harness.count(state: "completed") == sample + 1 }
            #expect(done, "\(worker.log.suffix(2000))")
        }
        let slowest = try await db.scalar("SELECT (max(extract(epoch FROM attempted_at - created_at)) * 1000)::bigint FROM siwa.jobs")
        #expect(slowest < 1000, "slowest wake-up \(slowest) ms")
        #expect(await worker.terminate() == 0)
    }

    /// With no plan steps the batch step completes each claim whole, taking
    /// no slot: once it has, a claim takes more jobs than the worker's one
    /// slot (jobs claimed together share the claim's `attempted_at`), and
    /// every job is still claimed once and completed.
    @Test func claimsOutgrowTheSlotsWhileTheBatchStepCompletesThem() async throws {
        let harness = try await WorkerHarness.start(planSteps: { _ in [] }, settings: ["SIWA_WORKER_CONCURRENCY": "1"])
        try atTestEnd { await harness.stop() }
        let subs = (0..<300).map { "burn.\($0)" }
        try await harness.enqueue(subs: subs)
        let worker = try harness.startWorker()
        let done = try await harness.wait { try await harness.count(state: "completed") == subs.count }
        #expect(done, "\(worker.log.suffix(2000))")
        let db = harness.database
        #expect(try await db.scalar("SELECT max(n) FROM (SELECT count(*) AS n FROM siwa.jobs GROUP BY attempted_at) AS claims") > 1)
        #expect(try await db.scalar("""
            SELECT count(*) FROM (SELECT details->>'job_id' FROM siwa.audit_log WHERE action = 'job.claimed'
                                  GROUP BY 1 HAVING count(*) <> 1) AS twice
            """) == 0)
        #expect(try await db.scalar("SELECT count(*) FROM siwa.jobs WHERE attempt <> 1") == 0)
        #expect(await worker.terminate() == 0)
    }

    /// SIGTERM: running jobs finish within the grace period; nothing new is claimed.
    @Test func sigtermLetsRunningJobsFinish() async throws {
        let harness = try await WorkerHarness.start(settings: ["SIWA_WORKER_CONCURRENCY": "2", "SIWA_WORKER_SHUTDOWN_GRACE_SECONDS": "10"])
        try atTestEnd { await harness.stop() }
        harness.downstream.set(delay: .seconds(1.5))
        try await harness.enqueue(subs: (0..<6).map { "grace.\($0)" })
        let worker = try harness.startWorker()
        try await harness.wait(upTo: .seconds(30)) { harness.downstream.deliveries.count == 2 }
        #expect(await worker.terminate() == 0)
        #expect(try await harness.count(state: "completed") == 2)
        #expect(try await harness.count(state: "available") == 4)
        #expect(try await harness.count(state: "running") == 0)
        #expect(worker.log.contains("waiting for running jobs"))
    }

    /// SIGTERM with a short grace: jobs still running after it are released
    /// (available again, the attempt not counted) for another worker.
    @Test func sigtermReleasesJobsPastTheGracePeriod() async throws {
        let harness = try await WorkerHarness.start(settings: ["SIWA_WORKER_CONCURRENCY": "2", "SIWA_WORKER_SHUTDOWN_GRACE_SECONDS": "0.3"])
        try atTestEnd { await harness.stop() }
        harness.downstream.set(delay: .seconds(4))
        try await harness.enqueue(subs: ["slow.1", "slow.2"])
        let worker = try harness.startWorker()
        try await harness.wait(upTo: .seconds(30)) { harness.downstream.deliveries.count == 2 }
        let start = ContinuousClock.now
        #expect(await worker.terminate() == 0)
        #expect(ContinuousClock.now - start < .seconds(3))
        let db = harness.database
        #expect(try await db.strings("SELECT state || '/' || attempt FROM siwa.jobs ORDER BY id") == ["available/0", "available/0"])
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'job.released'") == 2)
        // Steps done before the release stay done: the SQL step is not redone.
        #expect(try await db.scalar("SELECT count(*) FROM siwa.jobs WHERE steps_done ? '\(WorkerHarness.sqlStep)'") == 2)
    }

    /// Completed jobs are pruned once past SIWA_JOB_RETENTION_DAYS; discarded
    /// ones stay; the audit trail keeps the proof of both.
    @Test func finishedJobsArePrunedAfterTheRetention() async throws {
        let harness = try await WorkerHarness.start(settings: ["SIWA_JOB_RETENTION_DAYS": "0.00002"])  // 1.7 s
        try atTestEnd { await harness.stop() }
        try await harness.enqueue(subs: ["pruned"])
        // A job a worker can never run (no apple_sub): discarded at once.
        try await harness.database.execute("INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{}')")
        let worker = try harness.startWorker()
        let db = harness.database
        let pruned = try await harness.wait(upTo: .seconds(30)) {
            try await db.scalar("SELECT count(*) FROM siwa.jobs") == 1
        }
        #expect(pruned, "\(worker.log.suffix(2000))")
        #expect(try await db.strings("SELECT state FROM siwa.jobs") == ["discarded"])
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'job.completed' AND apple_sub = 'pruned'") == 1)
        #expect(worker.log.contains("Pruned finished jobs"))
        #expect(await worker.terminate() == 0)
    }

    /// A run whose lease is lost mid-step (here: rescued by hand while a slow
    /// webhook is in flight) and claimed again by the same worker changes
    /// nothing: only the new run records steps and completes the job; the
    /// SQL step on siwa's database is not run again.
    @Test func aRunThatLostItsLeaseChangesNothing() async throws {
        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        harness.downstream.set(delay: .seconds(3))
        try await harness.enqueue(subs: ["rescued"])
        let worker = try harness.startWorker()
        try await harness.wait(upTo: .seconds(30)) { harness.downstream.deliveries.count == 1 }
        let db = harness.database
        // What the rescuer does when a lease runs out.
        try await db.execute("""
            UPDATE siwa.jobs SET state = 'retryable', run_at = now(), locked_by = NULL, locked_until = NULL,
                   errors = errors || '[{"error": "lease expired: rescued by the test"}]'
            """)
        let done = try await harness.wait(upTo: .seconds(30)) { try await harness.count(state: "completed") == 1 }
        #expect(done, "\(worker.log.suffix(3000))")
        // The first run is over: its heartbeat found the lease gone and
        // stopped it (or, had it reached its end first, its completion was
        // refused); whatever it did would be in the rows below by now.
        try await worker.waitForLog("Lease lost; ")
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'job.claimed'") == 2)
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'job.completed'") == 1)
        #expect(try await db.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'job.step_completed' AND details->>'step' = '\(WorkerHarness.httpStep)'
            """) == 1)
        #expect(try await db.scalar("SELECT count(*) FROM app.purge_log") == 1)
        #expect(Set(harness.downstream.deliveries.map(\.webhookID)).count == 1)
        #expect(try await db.strings("SELECT state FROM siwa.jobs") == ["completed"])
        // The heartbeat noticed and stopped the first run.
        #expect(worker.log.contains("Lease lost; stopping the job here"), "\(worker.log.suffix(2000))")
        #expect(await worker.terminate() == 0)
    }

    /// An account event that arrives while the user's purge is running gets a
    /// purge of its own once that one completes (the running one may have
    /// passed the steps already; the downstream hears of the new event).
    @Test func anEventDuringARunningPurgeGetsAPurgeOfItsOwn() async throws {
        let siwa = try await ServerHarness.start(settings: ["SIWA_ON_CONSENT_REVOKED": "purge", "SIWA_CONSENT_REVOKED_PURGE_DELAY_DAYS": "0"])
        try atTestEnd { await siwa.stop() }
        let harness = try await WorkerHarness.start(database: siwa.database)
        try atTestEnd { await harness.stop() }
        harness.downstream.set(delay: .seconds(1.5))
        let sub = "during.\(UUID().uuidString)"
        #expect(try await siwa.post(token: siwa.notification("consent-revoked", sub: sub)).status == 200)
        let worker = try harness.startWorker()
        try await harness.wait(upTo: .seconds(30)) { harness.downstream.deliveries.count == 1 }
        // The purge is in its webhook step now.
        let answer = try await siwa.post(token: siwa.notification("account-deleted", sub: sub))
        #expect(answer.status == 200)
        let db = siwa.database
        let done = try await harness.wait(upTo: .seconds(30)) { try await harness.count(state: "completed") == 2 }
        #expect(done, "\(worker.log.suffix(2000))")
        #expect(try await db.strings("SELECT args->>'event_type' FROM siwa.jobs ORDER BY id") == ["consent-revoked", "account-deleted"])
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'job.rerun_enqueued'") == 1)
        #expect(try await db.scalar("SELECT count(*) FROM app.purge_log") == 2)
        let events = harness.downstream.deliveries.compactMap { $0.fields["event_type"] as? String }
        #expect(events == ["consent-revoked", "account-deleted"])
        // Later events (worker stopped): the first enqueues a purge, and a
        // purge that has not started covers the next.
        #expect(await worker.terminate() == 0)
        #expect(try await siwa.post(token: siwa.notification("account-delete", sub: sub)).status == 200)
        #expect(try await siwa.post(token: siwa.notification("account-delete", sub: sub)).status == 200)
        #expect(try await db.scalar("SELECT count(*) FROM siwa.jobs") == 3)
        #expect(try await db.scalar("SELECT count(*) FROM siwa.jobs WHERE args ? 'rerun'") == 1)
    }
}
