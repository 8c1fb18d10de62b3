import AccountLifecycle
import AccountStore
import Foundation
import PostgresNIO
import Testing

/// The queue's statements, in-process as the runtime role, against a real
/// database: the claim asks for the registered kinds only, and the SQL
/// applies the retry policy's decisions (retry at a time, or discard), each
/// guarded by the run's lease. (The worker around them: WorkerTests and the
/// other worker suites, with real `siwa worker` processes.)
@Suite("Job queue", .testDatabases)
struct JobQueueTests {
    /// The queue as `siwa worker` has it (runtime role), for `body`.
    static func withQueue(_ database: TestDatabase, _ body: @escaping @Sendable (JobQueue) async throws -> Void) async throws {
        try await TestDatabase.withClient(try database.workerConfiguration) { client in
            try await body(JobQueue(client: client, worker: "queue-test", logger: TestEnvironment.logger))
        }
    }

    /// The Apple sub in a claimed job's args (every kind's args carry it under `apple_sub`).
    static func sub(_ job: ClaimedJob) -> String? {
        (try? job.parameters(as: PurgeParameters.self))?.appleSub
    }

    /// Inserts a job of `kind` per sub, made runnable `age` seconds ago.
    static func enqueue(_ database: TestDatabase, kind: String, _ jobs: [(sub: String, age: Int)]) async throws {
        let rows = jobs.map { "('\(kind)', jsonb_build_object('apple_sub', '\($0.sub)', 'apple_team', 'TEAM123456'), now() - interval '\($0.age) seconds')" }
        try await database.execute("INSERT INTO siwa.jobs (kind, args, run_at) VALUES \(rows.joined(separator: ", "))")
    }

    @Test func theRetryPolicyDecidesOnceFromTheAttemptsLeft() {
        let policy = RetryPolicy(baseSeconds: 15, maxAttempts: 5)
        #expect(policy.afterFailure(attempt: 1, jobMaxAttempts: 25, permanent: false, jitter: 0) == .retry(afterSeconds: 15))
        #expect(policy.afterFailure(attempt: 4, jobMaxAttempts: 25, permanent: false, jitter: 0) == .retry(afterSeconds: 120))
        #expect(policy.afterFailure(attempt: 4, jobMaxAttempts: 25, permanent: false, jitter: 0.2) == .retry(afterSeconds: 144))
        // The smaller of the setting and the job's own max_attempts.
        #expect(policy.afterFailure(attempt: 5, jobMaxAttempts: 25, permanent: false) == .discard)
        #expect(policy.afterFailure(attempt: 3, jobMaxAttempts: 3, permanent: false) == .discard)
        #expect(policy.afterFailure(attempt: 2, jobMaxAttempts: 3, permanent: false, jitter: 0) == .retry(afterSeconds: 30))
        // A failure retrying cannot help: discarded on its first attempt.
        #expect(policy.afterFailure(attempt: 1, jobMaxAttempts: 25, permanent: true) == .discard)
        // A lost lease is no failure of the job: at once, while attempts are left.
        #expect(policy.afterLeaseExpired(attempt: 1, jobMaxAttempts: 25) == .retry(afterSeconds: 0))
        #expect(policy.afterLeaseExpired(attempt: 4, jobMaxAttempts: 25) == .retry(afterSeconds: 0))
        #expect(policy.afterLeaseExpired(attempt: 5, jobMaxAttempts: 25) == .discard)
        #expect(policy.afterLeaseExpired(attempt: 2, jobMaxAttempts: 2) == .discard)
    }

    /// The claim takes only the kinds asked for, oldest `run_at` first
    /// across them, up to the limit, and hands back each job's args whole,
    /// as bytes for its kind to decode.
    @Test func theClaimTakesTheRegisteredKindsOldestFirst() async throws {
        let database = try await TestDatabase.create()
        try await Self.enqueue(database, kind: "purge_user", [("k.p1", 100), ("k.p2", 80)])
        try await Self.enqueue(database, kind: "app_event", [("k.a1", 90)])
        try await Self.enqueue(database, kind: "not_registered", [("k.n1", 200)])
        try await Self.withQueue(database) { queue in
            let first = try await queue.claim(limit: 2, kinds: ["purge_user", "app_event"], leaseSeconds: 60)
            #expect(first.map(Self.sub) == ["k.p1", "k.a1"], "\(first.map(Self.sub))")
            #expect(first.map(\.kind) == ["purge_user", "app_event"])
            let args = try JSONValue(parsing: String(decoding: try #require(first.last).args, as: UTF8.self))
            #expect(args == .object(["apple_sub": .string("k.a1"), "apple_team": .string(TestEnvironment.team)]))
            #expect(try first[1].parameters(as: AppEventParameters.self) == AppEventParameters(appleSub: "k.a1", eventType: nil))
            let rest = try await queue.claim(limit: 10, kinds: ["purge_user", "app_event"], leaseSeconds: 60)
            #expect(rest.map(Self.sub) == ["k.p2"])
            #expect(try await queue.claim(limit: 10, kinds: ["purge_user", "app_event"], leaseSeconds: 60).isEmpty)
            #expect(try await queue.claim(limit: 10, kinds: [], leaseSeconds: 60).isEmpty)
        }
        #expect(try await database.strings("SELECT state FROM siwa.jobs WHERE kind = 'not_registered'") == ["available"])
    }

    /// `fail` writes what the decision says: back to `retryable` at now() +
    /// the delay, or `discarded` and finalized; each audited; nothing once
    /// the lease is gone.
    @Test func aFailedAttemptIsRecordedAsDecided() async throws {
        let database = try await TestDatabase.create()
        try await Self.enqueue(database, kind: "purge_user", [("f.retry", 20), ("f.discard", 10)])
        try await Self.withQueue(database) { queue in
            let jobs = try await queue.claim(limit: 2, kinds: ["purge_user"], leaseSeconds: 60)
            try #require(jobs.count == 2)
            let retried = try await queue.fail(jobs[0], step: "s", error: "detail", auditError: "summary",
                                               decision: .retry(afterSeconds: 600))
            let discarded = try await queue.fail(jobs[1], step: nil, error: "detail", auditError: "summary", decision: .discard)
            #expect(retried == .retryable && discarded == .discarded)
            // The same run again: its lease is gone, so nothing changes.
            #expect(try await queue.fail(jobs[0], step: "s", error: "again", auditError: "again", decision: .discard) == .leaseLost)
        }
        #expect(try await database.strings("""
            SELECT state || '/' || (finalized_at IS NOT NULL)::text || '/' || (locked_by IS NULL)::text
            FROM siwa.jobs ORDER BY id
            """) == ["retryable/false/true", "discarded/true/true"])
        // run_at: now() + 600 s for the retry (within the test's few seconds); now() for the discard.
        #expect(try await database.scalar("""
            SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = 'f.retry'
              AND run_at BETWEEN now() + interval '590 seconds' AND now() + interval '600 seconds'
            """) == 1)
        #expect(try await database.scalar("""
            SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = 'f.discard' AND run_at <= now() AND run_at = finalized_at
            """) == 1)
        #expect(try await database.strings("""
            SELECT action FROM siwa.audit_log WHERE action IN ('job.retry_scheduled', 'job.discarded') ORDER BY seq
            """) == ["job.retry_scheduled", "job.discarded"])
        #expect(try await database.scalar("SELECT jsonb_array_length(errors) FROM siwa.jobs WHERE args->>'apple_sub' = 'f.retry'") == 1)
    }

    /// Expired runs are rescued as the rescuer decided, by kind; a run whose
    /// lease was renewed after it was read as expired keeps running, and a
    /// decision applied twice (two rescuers) rescues once.
    @Test func theRescueAppliesDecisionsOnlyWhileTheLeaseIsStillExpired() async throws {
        let database = try await TestDatabase.create()
        try await Self.enqueue(database, kind: "purge_user", [("r.retry", 40), ("r.discard", 30), ("r.renewed", 20)])
        try await Self.enqueue(database, kind: "app_event", [("r.other", 10)])
        try await Self.withQueue(database) { queue in
            let jobs = try await queue.claim(limit: 4, kinds: ["purge_user", "app_event"], leaseSeconds: 0.2)
            try #require(jobs.count == 4)
            // The leases (0.2 s) run out: a clock, not an event; a slower
            // machine only waits longer.
            try await Task.sleep(for: .milliseconds(400))
            let expired = try await queue.expiredRuns(limit: 100)
            #expect(Set(expired.map(\.id)) == Set(jobs.map(\.id)))
            #expect(expired.allSatisfy { $0.attempt == 1 && $0.maxAttempts == 25 })
            // The third renews its lease after the rescuer read it.
            let renewed = try #require(jobs.first { Self.sub($0) == "r.renewed" })
            #expect(try await queue.extendLeases([(renewed.id, renewed.lease)], leaseSeconds: 60).isEmpty)
            let decisions = expired.map { run in
                let sub = jobs.first { $0.id == run.id }.flatMap(Self.sub)
                return (run: run, decision: sub == "r.discard" ? RetryDecision.discard : .retry(afterSeconds: 0))
            }
            let rescued = try await queue.rescue(decisions)
            #expect(Set(rescued.map(\.kind)) == ["purge_user", "app_event"])
            #expect(rescued.first { $0.kind == "purge_user" } == RescuedJobs(kind: "purge_user", rescued: 2, discarded: 1))
            #expect(rescued.first { $0.kind == "app_event" } == RescuedJobs(kind: "app_event", rescued: 1, discarded: 0))
            // Applied again (a second rescuer with the same reading): nothing left to rescue.
            #expect(try await queue.rescue(decisions).isEmpty)
        }
        #expect(try await database.strings("""
            SELECT args->>'apple_sub' || ':' || state FROM siwa.jobs ORDER BY args->>'apple_sub'
            """) == ["r.discard:discarded", "r.other:retryable", "r.renewed:running", "r.retry:retryable"])
        #expect(try await database.scalar("""
            SELECT count(*) FROM siwa.jobs WHERE state = 'retryable' AND run_at <= now() AND locked_by IS NULL
              AND errors->-1->>'error' LIKE 'lease expired%'
            """) == 2)
        #expect(try await database.strings("""
            SELECT action FROM siwa.audit_log WHERE action IN ('job.rescued', 'job.discarded') ORDER BY action
            """) == ["job.discarded", "job.rescued", "job.rescued"])
    }

    /// The queue knows no kind: its statements, `ClaimedJob`, the claim and
    /// the worker's engine (`Jobs/`, `Maintenance/`) name no purge, receipt or Apple sub (a kind's
    /// SQL and arguments are its own), and the shared claim reads no table
    /// but the jobs (it writes its audit rows).
    @Test func theQueueKnowsNoKind() throws {
        let root = TestEnvironment.repositoryRoot
        let engine = ["Sources/AccountLifecycle/Jobs", "Sources/AccountLifecycle/Maintenance"]
        let files = [root.appendingPathComponent("Sources/AccountStore/Jobs/JobQueue.swift"),
                     root.appendingPathComponent("Sources/AccountStore/Jobs/JobStatements.swift")]
            + (try engine.flatMap {
                try FileManager.default.contentsOfDirectory(at: root.appendingPathComponent($0), includingPropertiesForKeys: nil)
            })
        #expect(files.count > 10)
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            let found = text.split(separator: "\n").filter { $0.contains(/apple_sub|purge|receipt/) }
            #expect(found.isEmpty, "\(file.lastPathComponent): \(found)")
        }
        let tables = Set(ClaimJobsStatement.sql.matches(of: /siwa\.[a-z_]+/).map { String($0.output) })
        #expect(tables == ["siwa.jobs", "siwa.audit_log"], "\(tables)")
    }
}
