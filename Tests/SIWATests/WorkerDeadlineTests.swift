import AccountStore
import AppleSimulator
import Foundation
import Testing

/// Every step has a deadline that covers the whole step, and every attempt a
/// maximum run time: a downstream or a database that stops answering fails
/// the attempt (retried with backoff) instead of holding a worker slot.
/// Real `siwa worker` processes, real PostgreSQL, a real HTTP downstream.
@Suite("Worker deadlines", .testDatabases, .timeLimit(.minutes(10)))
struct WorkerDeadlineTests {
    /// Seconds between the attempt's claim and its recorded failure.
    static func firstAttemptSeconds(_ db: TestDatabase) async throws -> Double {
        let text = try await db.strings("""
            SELECT coalesce(extract(epoch FROM (j.errors->0->>'at')::timestamptz - a.occurred_at)::text, '')
            FROM siwa.jobs j JOIN siwa.audit_log a ON a.action = 'job.claimed' AND a.details->>'job_id' = j.id::text
                                                  AND (a.details->>'attempt')::int = 1
            """).first ?? ""
        return try #require(Double(text), "no first attempt recorded")
    }

    /// A downstream that answers 200, sends its headers and the first bytes
    /// of the body, then stalls: the step's timeout_seconds covers the body
    /// too, so the attempt fails at it ("timed out") and the retry completes.
    @Test func downstreamStallingAfterHeadersFailsTheAttemptAtItsTimeout() async throws {
        let harness = try await WorkerHarness.start(httpTimeout: 1)
        try atTestEnd { await harness.stop() }
        harness.downstream.set(.stallAfterHeaders(first: 1))
        try await harness.enqueue(subs: ["stalled"])
        let worker = try harness.startWorker()
        let done = try await harness.wait(upTo: .seconds(30)) { try await harness.count(state: "completed") == 1 }
        #expect(done, "\(worker.log.suffix(3000))")
        let deliveries = harness.downstream.deliveries
        #expect(deliveries.map(\.accepted) == [false, true])
        #expect(Set(deliveries.map(\.webhookID)).count == 1)
        let db = harness.database
        #expect(try await db.scalar("SELECT attempt FROM siwa.jobs") == 2)
        let error = try await db.strings("SELECT (errors->0->>'step') || ': ' || (errors->0->>'error') FROM siwa.jobs").first ?? ""
        #expect(error == "\(WorkerHarness.httpStep): timed out: 127.0.0.1 did not answer within 1 s", "\(error)")
        // Failed at the deadline (1 s), not at the stall's end (never). The
        // bound is far from both, so a loaded machine does not trip it.
        let seconds = try await Self.firstAttemptSeconds(db)
        #expect(seconds >= 1 && seconds < 10, "first attempt took \(seconds) s")
        #expect(await worker.terminate() == 0)
    }

    /// Enqueues a purge of `sub`, takes `lock` in a transaction of its own
    /// (left open), starts a worker, and runs `body` meanwhile.
    static func holding(_ lock: String, purging sub: String, in harness: WorkerHarness,
                        _ body: (OpenConnection, SIWAProcess) async throws -> Void) async throws {
        try await harness.enqueue(subs: [sub])
        try await OpenConnection.with(harness.database.configuration) { session in
            try await session.run("BEGIN")
            try await session.run(lock)
            let worker = try harness.startWorker()
            do {
                try await body(session, worker)
            } catch {
                await worker.kill9()
                throw error
            }
            await worker.kill9()
        }
    }

    /// A session that holds a user's row and never lets go (an operator's
    /// forgotten `BEGIN; SELECT ... FOR UPDATE`): the erase of that user's
    /// purge stops at the worker's lock_timeout (SessionLimits.runtime), the
    /// attempt fails and is retried, and the worker goes on with other jobs
    /// meanwhile; once the lock is gone the purge completes.
    @Test func aLockHeldByAStuckSessionFailsTheAttemptInsteadOfHanging() async throws {
        let harness = try await WorkerHarness.start(settings: ["SIWA_JOB_LEASE_SECONDS": "30", "SIWA_JOB_MAX_ATTEMPTS": "1000"])
        try atTestEnd { await harness.stop() }
        let db = harness.database
        try await Self.holding("SELECT FROM siwa.users WHERE apple_sub = 'held' FOR UPDATE", purging: "held", in: harness) { stuck, worker in
            let failed = try await harness.wait(upTo: .seconds(60)) {
                try await db.scalar("""
                    SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = 'held' AND state <> 'completed'
                      AND errors->0->>'error' = 'timed out waiting for a lock another session holds (lock_timeout, sqlstate 55P03)'
                    """) == 1
            }
            #expect(failed, "\(worker.log.suffix(3000))")
            // The worker is not stuck behind it: a purge enqueued now completes.
            try await harness.enqueue(subs: ["free"])
            #expect(try await harness.wait(upTo: .seconds(60)) {
                try await db.scalar("SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = 'free' AND state = 'completed'") == 1
            }, "\(worker.log.suffix(3000))")
            #expect(try await db.strings("SELECT email FROM siwa.users WHERE apple_sub = 'held'") == ["held@privaterelay.appleid.com"])
            try await stuck.run("ROLLBACK")
            #expect(try await harness.wait(upTo: .seconds(60)) { try await harness.count(state: "completed") == 2 },
                    "\(worker.log.suffix(3000))")
        }
    }

    /// A plan's SQL step may wait for the app's own locks up to its
    /// timeout_seconds, not the worker's lock_timeout: a row of the app's
    /// held for longer than that lock_timeout delays the step, which then
    /// completes on its first attempt.
    @Test func aPlanStepWaitsForTheAppsLocksUpToItsOwnTimeout() async throws {
        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        let db = harness.database
        try await Self.holding("SELECT FROM app.profiles WHERE apple_sub = 'busy' FOR UPDATE", purging: "busy", in: harness) { app, worker in
            #expect(try await harness.wait(upTo: .seconds(30)) {
                try await db.scalar("SELECT count(*) FROM siwa.jobs WHERE steps_done ? 'siwa.erase_personal_data'") == 1
            }, "\(worker.log.suffix(3000))")
            // Past the worker's 5 s lock_timeout, by the server's own clock.
            #expect(try await harness.wait(upTo: .seconds(30)) {
                try await db.scalar("""
                    SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                    WHERE NOT l.granted AND a.datname = current_database() AND l.waitstart < now() - interval '6 seconds'
                    """) == 1
            }, "\(worker.log.suffix(3000))")
            try await app.run("COMMIT")
            #expect(try await harness.wait(upTo: .seconds(30)) { try await harness.count(state: "completed") == 1 },
                    "\(worker.log.suffix(3000))")
        }
        #expect(try await db.strings("SELECT attempt || '/' || jsonb_array_length(errors) FROM siwa.jobs") == ["1/0"])
    }

    /// An SQL step on siwa's database that sleeps past its timeout_seconds is
    /// stopped by its statement_timeout, rolled back (nothing recorded) and
    /// retried; the retry (which does not sleep) completes the job.
    @Test func sleepingSQLStepFailsAtItsTimeoutAndIsRetried() async throws {
        let harness = try await WorkerHarness.start(planSteps: { hook in [
            ["name": "sleepy", "timeout_seconds": 1, "sql": [
                "INSERT INTO app.purge_log (apple_sub, siwa_user_id) VALUES ($1, $2)",
                // Sleeps on the first attempt only (no error recorded yet).
                """
                SELECT pg_sleep(CASE WHEN (SELECT jsonb_array_length(errors) FROM siwa.jobs
                                           WHERE args->>'apple_sub' = $1 AND state = 'running') = 0 THEN 30 ELSE 0 END)
                """,
            ]],
            ["name": WorkerHarness.httpStep, "http": ["url": hook, "secret_env": "TEST_DOWNSTREAM_SECRET", "timeout_seconds": 5]],
        ] })
        try atTestEnd { await harness.stop() }
        // The step reads siwa's queue, which the purge role it runs as may
        // not unless granted (a plan has no need to; this test's trick does).
        try await harness.database.execute("""
            GRANT USAGE ON SCHEMA siwa TO \(TestDatabase.purgeRole);
            GRANT SELECT (args, state, errors) ON siwa.jobs TO \(TestDatabase.purgeRole);
            """)
        try await harness.enqueue(subs: ["sleeper"])
        let worker = try harness.startWorker()
        let done = try await harness.wait(upTo: .seconds(30)) { try await harness.count(state: "completed") == 1 }
        #expect(done, "\(worker.log.suffix(3000))")
        let db = harness.database
        #expect(try await db.scalar("SELECT attempt FROM siwa.jobs") == 2)
        let error = try await db.strings("SELECT (errors->0->>'step') || ': ' || (errors->0->>'error') FROM siwa.jobs").first ?? ""
        #expect(error.hasPrefix("sleepy: timed out"), "\(error)")
        #expect(error.contains("statement_timeout"), "\(error)")
        let seconds = try await Self.firstAttemptSeconds(db)
        // At the timeout (1 s), not at the end of the 30 s sleep.
        #expect(seconds >= 1 && seconds < 10, "first attempt took \(seconds) s")
        // The timed-out attempt was rolled back: the step took effect once.
        #expect(try await db.scalar("SELECT count(*) FROM app.purge_log") == 1)
        #expect(await worker.terminate() == 0)
    }

    /// The same on another database (database_url_env): its statement_timeout
    /// is set in its own transaction. A step that always sleeps fails each
    /// attempt at its timeout, and the job is discarded after its attempts.
    @Test func sleepingSQLStepOnAnotherDatabaseFailsAtItsTimeout() async throws {
        let analytics = try await TestDatabase.create()
        try await analytics.execute("CREATE TABLE events (apple_sub text NOT NULL)")
        let harness = try await WorkerHarness.start(analytics: analytics, planSteps: { _ in [
            ["name": WorkerHarness.analyticsStep, "database_url_env": "TEST_ANALYTICS_DATABASE_URL", "timeout_seconds": 0.5,
             "sql": ["DELETE FROM events WHERE apple_sub = $1", "SELECT pg_sleep(30)"]],
        ] }, settings: ["SIWA_JOB_MAX_ATTEMPTS": "2"])
        try atTestEnd { await harness.stop() }
        try await harness.enqueue(subs: ["sleeper"])
        let start = ContinuousClock.now
        let worker = try harness.startWorker()
        let discarded = try await harness.wait(upTo: .seconds(30)) { try await harness.count(state: "discarded") == 1 }
        #expect(discarded, "\(worker.log.suffix(3000))")
        // Two attempts of 0.5 s each, the backoff, the worker's start.
        #expect(ContinuousClock.now - start < .seconds(15))
        let db = harness.database
        let errors = try await db.strings("SELECT e->>'error' FROM siwa.jobs, jsonb_array_elements(errors) AS e")
        #expect(errors.count == 2)
        #expect(errors.allSatisfy { $0.hasPrefix("timed out") && $0.contains("statement_timeout") }, "\(errors)")
        let seconds = try await Self.firstAttemptSeconds(db)
        // At the timeout, not at the end of the 30 s sleep.
        #expect(seconds >= 0.5 && seconds < 10, "first attempt took \(seconds) s")
        #expect(await worker.terminate() == 0)
    }

    /// An attempt that runs past SIWA_JOB_MAX_RUN_SECONDS is stopped (in the
    /// middle of its third step here), counted as a failed attempt and
    /// retried; the steps it finished stay done, and the retry completes.
    @Test func anAttemptPastTheMaxRunTimeIsStoppedAndRetried() async throws {
        let harness = try await WorkerHarness.start(planSteps: { _ in
            (1...3).map { ["name": "nap-\($0)", "timeout_seconds": 2, "sql": ["SELECT pg_sleep(1.5)"]] }
        }, settings: ["SIWA_JOB_MAX_RUN_SECONDS": "4", "SIWA_JOB_LEASE_SECONDS": "2"])
        try atTestEnd { await harness.stop() }
        try await harness.enqueue(subs: ["long-run"])
        let worker = try harness.startWorker()
        let done = try await harness.wait(upTo: .seconds(30)) { try await harness.count(state: "completed") == 1 }
        #expect(done, "\(worker.log.suffix(3000))")
        let db = harness.database
        #expect(try await db.scalar("SELECT attempt FROM siwa.jobs") == 2)
        let error = try await db.strings("SELECT errors->0->>'error' FROM siwa.jobs").first ?? ""
        #expect(error.contains("timed out: the attempt ran past SIWA_JOB_MAX_RUN_SECONDS (4 s)"), "\(error)\n\(worker.log.suffix(4000))")
        let seconds = try await Self.firstAttemptSeconds(db)
        // Stopped at 4 s: step 3 (which would end at about 4.5 s) was not
        // recorded by this attempt (below).
        #expect(seconds >= 4, "first attempt took \(seconds) s")
        // Steps 1 and 2 were done by the first attempt, step 3 by the second.
        #expect(try await db.strings("""
            SELECT (details->>'attempt') || ':' || (details->>'step') FROM siwa.audit_log
            WHERE action = 'job.step_completed' AND details->>'step' LIKE 'nap-%' ORDER BY seq
            """) == ["1:nap-1", "1:nap-2", "2:nap-3"])
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'job.retry_scheduled'") == 1)
        #expect(await worker.terminate() == 0)
    }

    /// SIWA_JOB_MAX_RUN_SECONDS is checked against the lease and against
    /// every step's deadline at start-up.
    @Test func maxRunTimeIsCheckedAgainstTheLeaseAndTheSteps() async throws {
        // The plan's SQL step has the default timeout (60 s, so 65 s with the margin).
        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        let short = try await runSIWA(["worker"], environment: harness.settings.merging(["SIWA_JOB_MAX_RUN_SECONDS": "20"]) { $1 })
        #expect(short.status == 2)
        #expect(short.output.contains("siwa: SIWA_JOB_MAX_RUN_SECONDS: 20 s is too short for step '\(WorkerHarness.sqlStep)', which may take up to 65 s"),
                "\(short.output)")
        let belowLease = try await runSIWA(["worker"], environment: harness.settings.merging(
            ["SIWA_JOB_MAX_RUN_SECONDS": "40", "SIWA_JOB_LEASE_SECONDS": "60"]) { $1 })
        #expect(belowLease.status == 2)
        #expect(belowLease.output.contains("siwa: SIWA_JOB_MAX_RUN_SECONDS: must be at least SIWA_JOB_LEASE_SECONDS (60)"), "\(belowLease.output)")
    }

    /// `/metrics` counts running jobs that are overdue: attempted longer ago
    /// than SIWA_JOB_MAX_RUN_SECONDS, or holding an expired lease.
    @Test func metricsReportOverdueRunningJobs() async throws {
        let siwa = try await ServerHarness.start(settings: ["SIWA_JOB_MAX_RUN_SECONDS": "600"])
        try atTestEnd { await siwa.stop() }
        try await siwa.database.execute("""
            INSERT INTO siwa.jobs (kind, args, state, attempt, locked_by, locked_until, attempted_at) VALUES
              ('purge_user', '{"apple_sub": "fresh", "apple_team": "TEAM123456"}', 'running', 1, 'w/1', now() + interval '1 minute', now() - interval '1 minute'),
              ('purge_user', '{"apple_sub": "too-long", "apple_team": "TEAM123456"}', 'running', 1, 'w/2', now() + interval '1 minute', now() - interval '11 minutes'),
              ('purge_user', '{"apple_sub": "lease-gone", "apple_team": "TEAM123456"}', 'running', 1, 'w/3', now() - interval '1 second', now() - interval '2 minutes'),
              ('purge_user', '{"apple_sub": "waiting", "apple_team": "TEAM123456"}', 'available', 0, NULL, NULL, now() - interval '1 hour');
            """)
        let metrics = try await siwa.getMetrics().text
        #expect(metrics.contains("siwa_jobs_running_overdue 2"), "\(metrics)")
        #expect(metrics.contains(#"siwa_jobs{kind="purge_user",state="running"} 3"#))
        try await siwa.database.execute("UPDATE siwa.jobs SET state = 'retryable', locked_by = NULL, locked_until = NULL WHERE state = 'running'")
        #expect(try await siwa.getMetrics().text.contains("siwa_jobs_running_overdue 0"))
    }
}
