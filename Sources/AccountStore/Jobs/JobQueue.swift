import Foundation
import Logging
import PostgresNIO

/// A job this worker holds (state `running`, lease in `locked_until`): what
/// every job has. Its kind reads its own arguments from `args`
/// (`parameters(as:)`) and looks up whatever else it needs itself.
public struct ClaimedJob: Sendable, Equatable {
    public let id: Int64
    public let kind: String
    /// 1 on the first run.
    public let attempt: Int
    public let maxAttempts: Int
    /// This claim's `locked_by`: every write for this run is guarded by it.
    public let lease: String
    /// Steps completed by earlier attempts (skipped now).
    public let stepsDone: Set<String>
    /// The job's `args` (jsonb) as JSON bytes.
    public let args: Data

    public init(id: Int64, kind: String, attempt: Int, maxAttempts: Int, lease: String, stepsDone: Set<String> = [],
                args: Data = Data("{}".utf8)) {
        self.id = id
        self.kind = kind
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.lease = lease
        self.stepsDone = stepsDone
        self.args = args
    }

    /// The same job with `step` recorded as done.
    public func recording(_ step: String) -> ClaimedJob {
        ClaimedJob(id: id, kind: kind, attempt: attempt, maxAttempts: maxAttempts, lease: lease,
                   stepsDone: stepsDone.union([step]), args: args)
    }
}

/// What a kind does in the transaction that completes its jobs, before it
/// commits: the records its completion must never be without (the user
/// deletion's signed statement and its line outside the database, say). A
/// throw fails the transaction, and with it the completion.
public protocol JobCompletionHook: Sendable {
    func jobsCompleted(_ jobIDs: [Int64], on connection: PostgresConnection, logger: Logger) async throws
}

/// Jobs of one kind whose expired leases one rescue pass took back.
public struct RescuedJobs: Sendable, Equatable {
    public let kind: String
    public let rescued: Int
    /// Of those, the ones that had used their last attempt.
    public let discarded: Int

    public init(kind: String, rescued: Int, discarded: Int) {
        self.kind = kind
        self.rescued = rescued
        self.discarded = discarded
    }
}

/// What became of a failed attempt.
public enum FailureOutcome: String, Sendable {
    case retryable
    case discarded
    /// The lease was lost before the failure was recorded: another worker
    /// (or the rescuer) owns the job now; nothing was written.
    case leaseLost
}

/// The worker's side of `siwa.jobs`, for every kind: claim, heartbeat,
/// record steps, complete, fail, snooze, rescue, release, prune. It knows
/// no kind's arguments: a kind's own statements live beside it, and what a
/// kind does as its jobs complete is its `JobCompletionHook`. Admin
/// operations: `JobAdministration`.
public struct JobQueue: Sendable {
    public static let wakeChannel = "siwa_jobs"

    let client: PostgresClient
    /// Names this worker in its leases (`locked_by`) and in the audit trail.
    public let worker: String
    let logger: Logger
    /// By kind: run in the transaction that completes a job of that kind.
    let completionHooks: [String: any JobCompletionHook]

    public init(client: PostgresClient, worker: String, logger: Logger, completionHooks: [String: any JobCompletionHook] = [:]) {
        self.client = client
        self.worker = worker
        self.logger = logger
        self.completionHooks = completionHooks
    }

    /// The hook of `kind` for the jobs among `jobIDs` that the transaction on
    /// `connection` has just completed (nothing for a kind without one).
    func jobsCompleted(_ jobIDs: [Int64], kind: String, on connection: PostgresConnection) async throws {
        guard let hook = completionHooks[kind], !jobIDs.isEmpty else { return }
        try await hook.jobsCompleted(jobIDs, on: connection, logger: logger)
    }

    /// One statement on a guarded connection, its rows decoded as `T`.
    private func values<T: PostgresDecodable & Sendable>(_ query: PostgresQuery, as type: T.Type) async throws -> [T] {
        try await client.withGuardedConnection { connection in
            var values: [T] = []
            for try await value in try await connection.query(query, logger: logger).decode(T.self) { values.append(value) }
            return values
        }
    }

    /// A statement answering one count.
    private func count(_ query: PostgresQuery) async throws -> Int {
        try await values(query, as: Int.self).first ?? 0
    }

    /// Up to `limit` runnable jobs of `kinds`, oldest first, each under a new lease.
    public func claim(limit: Int, kinds: [String], leaseSeconds: Double) async throws -> [ClaimedJob] {
        guard limit > 0, !kinds.isEmpty else { return [] }
        let statement = ClaimJobsStatement(worker: worker, limit: limit, kinds: kinds, leaseSeconds: leaseSeconds)
        return try await client.withGuardedConnection { connection in
            var jobs: [ClaimedJob] = []
            for try await job in try await connection.execute(statement, logger: logger) { jobs.append(job) }
            return jobs
        }
    }

    /// Extends the leases of the given runs. Returns the leases that are
    /// lost: the job was rescued after the lease ran out (a long database
    /// outage), or claimed again since. A run that merely finished meanwhile
    /// is not "lost".
    public func extendLeases(_ runs: [(id: Int64, lease: String)], leaseSeconds: Double) async throws -> Set<String> {
        guard !runs.isEmpty else { return [] }
        let extended = try await values("""
            UPDATE siwa.jobs AS j SET locked_until = now() + make_interval(secs => \(leaseSeconds)::float8)
            FROM unnest(\(runs.map(\.id))::bigint[], \(runs.map(\.lease))::text[]) AS run(id, lease)
            WHERE j.id = run.id AND j.locked_by = run.lease AND j.state = 'running'
            RETURNING j.locked_by
            """, as: String.self)
        let others = runs.filter { !extended.contains($0.lease) }
        guard !others.isEmpty else { return [] }
        // A second statement, so it sees what committed while the first waited.
        let lost = try await values("""
            SELECT run.lease FROM siwa.jobs AS j
            JOIN unnest(\(others.map(\.id))::bigint[], \(others.map(\.lease))::text[]) AS run(id, lease) ON j.id = run.id
            WHERE (j.state = 'running' AND j.locked_by <> run.lease) OR j.state = 'available'
               OR (j.state = 'retryable' AND j.errors->-1->>'error' LIKE 'lease expired%')
            """, as: String.self)
        return Set(lost)
    }

    /// Records a completed step done outside siwa's database (an HTTP call,
    /// SQL elsewhere), completing the job if it was the last step. False if
    /// the lease was lost (the step will run again: at-least-once).
    public func recordStep(_ step: JobStep) async throws -> Bool {
        // The completion and what its kind's hook writes go in one transaction.
        if step.completesJob && completionHooks[step.kind] != nil { return try await inStepTransaction(step) { _ in } }
        return try await client.withGuardedConnection { connection in try await record(step, on: connection) }
    }

    /// RecordStepStatement on `connection`: true if it matched (lease held, step new).
    private func record(_ step: JobStep, on connection: PostgresConnection) async throws -> Bool {
        var held: Int64 = 0
        for try await count in try await connection.execute(RecordStepStatement(step), logger: logger) { held = count }
        return held == 1
    }

    /// Completes a job that has no step left to run (its plan lost steps
    /// since they were recorded). False if the lease was lost.
    public func complete(_ job: ClaimedJob) async throws -> Bool {
        try await client.withGuardedTransaction(logger: logger) { [logger] connection in
            let rows = try await connection.query("""
                WITH job AS (
                    UPDATE siwa.jobs SET state = 'completed', finalized_at = now(), locked_until = NULL
                    WHERE id = \(job.id) AND locked_by = \(job.lease) AND state = 'running'
                    RETURNING id, \(unescaped: JobAuditRow.subject("args")), attempt
                ), audit AS (
                    \(unescaped: JobAuditRow.insert)
                    SELECT 'worker', 'job.completed', \(unescaped: JobAuditRow.subjectColumns()), jsonb_build_object('job_id', id, 'attempt', attempt, 'worker', \(job.lease)::text)
                    FROM job
                )
                SELECT count(*) FROM job
                """, logger: logger)
            var completed = false
            for try await count in rows.decode(Int.self) { completed = count == 1 }
            if completed { try await jobsCompleted([job.id], kind: job.kind, on: connection) }
            return completed
        }
    }

    /// Runs `body` in one transaction on siwa's database together with the
    /// step's record: either both commit or neither does, so the step takes
    /// effect exactly once. The record goes last, so the job row is locked
    /// only for a moment (the receiver may need it to mark a rerun); if the
    /// lease was lost meanwhile, the record matches nothing and the whole
    /// transaction rolls back. Returns false then. The last step's
    /// transaction also completes the job and runs its kind's completion hook.
    public func inStepTransaction(_ step: JobStep, _ body: @escaping @Sendable (PostgresConnection) async throws -> Void) async throws -> Bool {
        do {
            try await client.withGuardedTransaction(logger: logger) { connection in
                try await body(connection)
                guard try await record(step, on: connection) else { throw LeaseLostDuringStep() }
                if step.completesJob { try await jobsCompleted([step.jobID], kind: step.kind, on: connection) }
            }
            return true
        } catch is LeaseLostDuringStep {
            return false
        }
    }

    /// Ends a failed attempt as the worker decided (`RetryPolicy`): back to
    /// `retryable`, or `discarded`. The error joins the job's history;
    /// `auditError` (no server text: it may quote data) goes to the audit trail.
    /// `unbackedSteps`: a completion refused for steps without their audit
    /// rows (StepFailure.unbackedSteps); a `job.completion_refused` row
    /// naming them goes before the `job.discarded` one.
    public func fail(_ job: ClaimedJob, step: String?, error: String, auditError: String,
                     decision: RetryDecision, unbackedSteps: [String] = []) async throws -> FailureOutcome {
        let rows = try await values("""
            WITH job AS (
                UPDATE siwa.jobs
                SET state = \(decision.state)::text,
                    finalized_at = CASE WHEN \(decision.state)::text = 'discarded' THEN now() END,
                    run_at = now() + make_interval(secs => \(decision.delaySeconds)::float8),
                    errors = errors || jsonb_build_array(jsonb_build_object(
                        'attempt', attempt, 'at', now(), 'step', \(step)::text, 'error', \(error)::text, 'worker', \(job.lease)::text)),
                    locked_by = NULL, locked_until = NULL
                WHERE id = \(job.id) AND locked_by = \(job.lease) AND state = 'running'
                RETURNING id, state, attempt, run_at, \(unescaped: JobAuditRow.subject("args"))
            ), audit AS (
                \(unescaped: JobAuditRow.insert)
                SELECT 'worker', outcome.action, \(unescaped: JobAuditRow.subjectColumns("job")), outcome.details
                FROM job, LATERAL (VALUES
                    (1, 'job.completion_refused',
                     jsonb_build_object('job_id', job.id, 'attempt', job.attempt, 'steps_without_evidence', \(unbackedSteps)::text[],
                                        'worker', \(job.lease)::text)),
                    (2, CASE WHEN job.state = 'discarded' THEN 'job.discarded' ELSE 'job.retry_scheduled' END,
                     jsonb_build_object('job_id', job.id, 'attempt', job.attempt, 'step', \(step)::text, 'error', \(auditError)::text,
                                        'run_at', job.run_at, 'worker', \(job.lease)::text))) AS outcome(position, action, details)
                WHERE outcome.position = 2 OR cardinality(\(unbackedSteps)::text[]) > 0
                ORDER BY outcome.position
            )
            SELECT state FROM job
            """, as: String.self)
        for state in rows {
            return state == "discarded" ? .discarded : .retryable
        }
        return .leaseLost
    }

    /// What `snooze` did.
    public enum SnoozeOutcome: Sendable, Equatable {
        /// The job waits until its time.
        case snoozed
        /// Its time has come by the database's clock (or the key is gone:
        /// whoever removed it ended the wait): run it now.
        case due
        case leaseLost
    }

    /// Puts a running job back to wait until the time its `args[untilArg]`
    /// holds, as if this attempt had not been made; the steps it recorded
    /// stay done (River's snooze). The database's clock decides, so a worker
    /// whose clock lags cannot make a due job bounce between claim and snooze.
    public func snooze(_ job: ClaimedJob, untilArg: String) async throws -> SnoozeOutcome {
        let rows = try await values("""
            WITH held AS (
                SELECT count(*) AS n FROM siwa.jobs WHERE id = \(job.id) AND locked_by = \(job.lease) AND state = 'running'
            ), job AS (
                UPDATE siwa.jobs SET state = 'available', attempt = greatest(attempt - 1, 0),
                                     run_at = (args->>\(untilArg)::text)::timestamptz, locked_by = NULL, locked_until = NULL
                WHERE id = \(job.id) AND locked_by = \(job.lease) AND state = 'running'
                  AND coalesce((args->>\(untilArg)::text)::timestamptz > now(), false)
                RETURNING id, kind, \(unescaped: JobAuditRow.subject("args")), run_at
            ), audit AS (
                \(unescaped: JobAuditRow.insert)
                SELECT 'worker', 'job.snoozed', \(unescaped: JobAuditRow.subjectColumns()),
                       jsonb_build_object('job_id', id, 'kind', kind, 'until', siwa.utc_iso(run_at), 'worker', \(job.lease)::text)
                FROM job
            )
            SELECT CASE WHEN EXISTS (SELECT FROM job) THEN 'snoozed' WHEN (SELECT n FROM held) = 1 THEN 'due' ELSE 'lost' END
            """, as: String.self)
        switch rows.first {
        case "snoozed": return .snoozed
        case "due": return .due
        default: return .leaseLost
        }
    }

    /// Gives jobs back at shutdown, as if never attempted this time (the
    /// attempt is not counted; steps already recorded stay done).
    public func release(_ runs: [(id: Int64, lease: String)]) async throws -> Int {
        guard !runs.isEmpty else { return 0 }
        let ids = runs.map(\.id)
        let leases = runs.map(\.lease)
        return try await count("""
            WITH job AS (
                UPDATE siwa.jobs AS j SET state = 'available', attempt = greatest(j.attempt - 1, 0), run_at = now(),
                                          locked_by = NULL, locked_until = NULL
                FROM unnest(\(ids)::bigint[], \(leases)::text[]) AS run(id, lease)
                WHERE j.id = run.id AND j.locked_by = run.lease AND j.state = 'running'
                RETURNING j.id, \(unescaped: JobAuditRow.subject("j.args")), run.lease
            ), audit AS (
                \(unescaped: JobAuditRow.insert)
                SELECT 'worker', 'job.released', \(unescaped: JobAuditRow.subjectColumns()), jsonb_build_object('job_id', id, 'worker', lease, 'reason', 'shutdown')
                FROM job
            )
            SELECT count(*) FROM job
            """)
    }

    /// Up to `limit` running jobs whose lease ran out (their worker died or
    /// lost the database), the longest expired first, for `rescue`.
    public func expiredRuns(limit: Int) async throws -> [ExpiredRun] {
        let query: PostgresQuery = """
            SELECT id, kind, attempt, max_attempts, locked_by FROM siwa.jobs
            WHERE state = 'running' AND locked_until < now()
            ORDER BY locked_until LIMIT \(Int32(clamping: limit))
            """
        return try await client.withGuardedConnection { [logger] connection in
            var runs: [ExpiredRun] = []
            let rows = try await connection.query(query, logger: logger).decode((Int64, String, Int32, Int32, String).self)
            for try await (id, kind, attempt, maxAttempts, lease) in rows {
                runs.append(ExpiredRun(id: id, kind: kind, attempt: Int(attempt), maxAttempts: Int(maxAttempts), lease: lease))
            }
            return runs
        }
    }

    /// Applies the rescuer's decisions to expired runs: each goes back to
    /// `retryable` or to `discarded`, its lost lease in its error history.
    /// A run whose lease was renewed, or that ended, since `expiredRuns`
    /// read it is left alone (the update is guarded by the lease and the
    /// expiry, as every write of the queue is), and so is a row another
    /// rescuer holds (SKIP LOCKED): any worker may rescue. Returns what was
    /// rescued, by kind (nothing rescued: empty).
    public func rescue(_ decisions: [(run: ExpiredRun, decision: RetryDecision)]) async throws -> [RescuedJobs] {
        guard !decisions.isEmpty else { return [] }
        let query: PostgresQuery = """
            WITH decided AS (
                SELECT * FROM unnest(\(decisions.map(\.run.id))::bigint[], \(decisions.map(\.run.lease))::text[],
                                     \(decisions.map(\.decision.state))::text[], \(decisions.map(\.decision.delaySeconds))::float8[])
                              AS d(id, lease, state, delay)
            ), expired AS (
                SELECT j.id FROM siwa.jobs AS j JOIN decided AS d ON j.id = d.id
                WHERE j.locked_by = d.lease AND j.state = 'running' AND j.locked_until < now()
                FOR UPDATE OF j SKIP LOCKED
            ), job AS (
                UPDATE siwa.jobs AS j
                SET state = d.state,
                    finalized_at = CASE WHEN d.state = 'discarded' THEN now() END,
                    run_at = now() + make_interval(secs => d.delay),
                    errors = j.errors || jsonb_build_array(jsonb_build_object(
                        'attempt', j.attempt, 'at', now(), 'worker', j.locked_by,
                        'error', 'lease expired: the worker stopped or lost the database before finishing')),
                    locked_by = NULL, locked_until = NULL
                FROM expired JOIN decided AS d ON d.id = expired.id
                WHERE j.id = expired.id
                RETURNING j.id, j.kind, j.state, j.attempt, \(unescaped: JobAuditRow.subject("j.args"))
            ), audit AS (
                \(unescaped: JobAuditRow.insert)
                SELECT 'worker', CASE WHEN state = 'discarded' THEN 'job.discarded' ELSE 'job.rescued' END, \(unescaped: JobAuditRow.subjectColumns()),
                       jsonb_build_object('job_id', id, 'attempt', attempt, 'error', 'lease expired', 'worker', \(worker)::text)
                FROM job
            )
            SELECT kind, count(*)::bigint, (count(*) FILTER (WHERE state = 'discarded'))::bigint FROM job GROUP BY kind
            """
        return try await client.withGuardedConnection { [logger] connection in
            var rescued: [RescuedJobs] = []
            for try await (kind, count, discarded) in try await connection.query(query, logger: logger).decode((String, Int64, Int64).self) {
                rescued.append(RescuedJobs(kind: kind, rescued: Int(count), discarded: Int(discarded)))
            }
            return rescued
        }
    }

    /// Deletes completed and cancelled jobs finalized more than
    /// `retentionSeconds` ago (discarded ones stay until someone looks; the
    /// audit trail keeps the proof either way). At most 10,000 per call.
    public func prune(retentionSeconds: Double) async throws -> Int {
        return try await count("""
            WITH gone AS (
                DELETE FROM siwa.jobs
                WHERE id IN (SELECT id FROM siwa.jobs
                             WHERE state IN ('completed', 'cancelled')
                               AND finalized_at < now() - make_interval(secs => \(retentionSeconds)::float8)
                             LIMIT 10000)
                  -- Again here: a job retried meanwhile is rechecked against this, and kept.
                  AND state IN ('completed', 'cancelled')
                  AND finalized_at < now() - make_interval(secs => \(retentionSeconds)::float8)
                RETURNING 1
            )
            SELECT count(*) FROM gone
            """)
    }
}

/// The step's record matched nothing (the lease was lost): roll the step back.
struct LeaseLostDuringStep: Error {}
