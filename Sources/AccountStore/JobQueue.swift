import Foundation
import Logging
import PostgresNIO

/// A job this worker holds (state `running`, lease in `locked_until`).
public struct ClaimedJob: Sendable, Equatable {
    public let id: Int64
    public let kind: String
    public let appleSub: String?
    public let eventType: String?
    /// 1 on the first run.
    public let attempt: Int
    public let maxAttempts: Int
    /// Plan steps completed by earlier attempts (skipped now).
    public let stepsDone: Set<String>
    /// siwa's `users.id` for the sub, if it has a row.
    public let userID: Int64?
    /// This claim's `locked_by`: every write for this run is guarded by it.
    public let lease: String
    /// A consent revocation under `sign_out` (args.scope `tokens`): only the
    /// user's Apple tokens are revoked and deleted; their data stays.
    public let tokensOnly: Bool
    /// The user has stored Apple tokens (when claimed): they are revoked
    /// before anything is erased.
    public let holdsTokens: Bool
    /// The job's whole `args` (jsonb) as JSON text, for a kind that reads
    /// more of them than the fields above (JSONValue(parsing:)).
    public let args: String

    public init(id: Int64, kind: String, appleSub: String?, eventType: String?, attempt: Int, maxAttempts: Int,
                stepsDone: Set<String>, userID: Int64?, lease: String, tokensOnly: Bool = false,
                holdsTokens: Bool = false, args: String = "{}") {
        self.id = id
        self.kind = kind
        self.appleSub = appleSub
        self.eventType = eventType
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.stepsDone = stepsDone
        self.userID = userID
        self.lease = lease
        self.tokensOnly = tokensOnly
        self.holdsTokens = holdsTokens
        self.args = args
    }

    /// The same job with `step` recorded as done.
    public func recording(_ step: String) -> ClaimedJob {
        ClaimedJob(id: id, kind: kind, appleSub: appleSub, eventType: eventType, attempt: attempt,
                   maxAttempts: maxAttempts, stepsDone: stepsDone.union([step]), userID: userID, lease: lease,
                   tokensOnly: tokensOnly, holdsTokens: holdsTokens, args: args)
    }
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
/// record steps, complete, fail, rescue, release, prune. The purge's own
/// statements are in PurgeStatements.swift; admin operations in
/// `JobAdministration`.
public struct JobQueue: Sendable {
    public static let wakeChannel = "siwa_jobs"

    let client: PostgresClient
    /// Names this worker in its leases (`locked_by`) and in the audit trail.
    public let worker: String
    let logger: Logger
    /// Signs a receipt for each purge as it completes (nil: receipts are off).
    let receipts: (any ReceiptSigning)?
    /// Where each completed erasure is appended before it commits (nil: no
    /// ledger, as in tests of the queue alone; `siwa worker` always has one).
    let ledger: (any ErasureLedgerWriting)?

    public init(client: PostgresClient, worker: String, logger: Logger, receipts: (any ReceiptSigning)? = nil,
                ledger: (any ErasureLedgerWriting)? = nil) {
        self.client = client
        self.worker = worker
        self.logger = logger
        self.receipts = receipts
        self.ledger = ledger
    }

    /// What a completed purge leaves besides its row, for the purges among
    /// `jobIDs` that the transaction on `connection` has just completed:
    /// their receipts, written in it (DeletionReceipts.issue), then their
    /// erasure ledger lines (recordErasures), before it commits.
    func recordCompletedPurges(for jobIDs: [Int64], on connection: PostgresConnection) async throws {
        if let receipts, !jobIDs.isEmpty {
            try await DeletionReceipts.issue(for: jobIDs, signer: receipts, on: connection, logger: logger)
        }
        try await recordErasures(for: jobIDs, on: connection)
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
        // The completion, its receipt and its ledger line go in one transaction.
        if step.completesJob && (receipts != nil || ledger != nil) { return try await inStepTransaction(step) { _ in } }
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
                    RETURNING id, args->>'apple_sub' AS apple_sub, attempt
                ), audit AS (
                    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
                    SELECT 'worker', 'job.completed', apple_sub, jsonb_build_object('job_id', id, 'attempt', attempt, 'worker', \(job.lease)::text)
                    FROM job
                )
                SELECT count(*) FROM job
                """, logger: logger)
            var completed = false
            for try await count in rows.decode(Int.self) { completed = count == 1 }
            if completed { try await recordCompletedPurges(for: [job.id], on: connection) }
            return completed
        }
    }

    /// Runs `body` in one transaction on siwa's database together with the
    /// step's record: either both commit or neither does, so the step takes
    /// effect exactly once. The record goes last, so the job row is locked
    /// only for a moment (the receiver may need it to mark a rerun); if the
    /// lease was lost meanwhile, the record matches nothing and the whole
    /// transaction rolls back. Returns false then. The last step's
    /// transaction also completes the job and holds its receipt.
    public func inStepTransaction(_ step: JobStep, _ body: @escaping @Sendable (PostgresConnection) async throws -> Void) async throws -> Bool {
        do {
            try await client.withGuardedTransaction(logger: logger) { connection in
                try await body(connection)
                guard try await record(step, on: connection) else { throw LeaseLostDuringStep() }
                if step.completesJob { try await recordCompletedPurges(for: [step.jobID], on: connection) }
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
                RETURNING id, state, attempt, run_at, args->>'apple_sub' AS apple_sub
            ), audit AS (
                INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
                SELECT 'worker', outcome.action, job.apple_sub, outcome.details
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
                RETURNING id, kind, args->>'apple_sub' AS apple_sub, run_at
            ), audit AS (
                INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
                SELECT 'worker', 'job.snoozed', apple_sub,
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
                RETURNING j.id, j.args->>'apple_sub' AS apple_sub, run.lease
            ), audit AS (
                INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
                SELECT 'worker', 'job.released', apple_sub, jsonb_build_object('job_id', id, 'worker', lease, 'reason', 'shutdown')
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
                RETURNING j.id, j.kind, j.state, j.attempt, j.args->>'apple_sub' AS apple_sub
            ), audit AS (
                INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
                SELECT 'worker', CASE WHEN state = 'discarded' THEN 'job.discarded' ELSE 'job.rescued' END, apple_sub,
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

    /// Forgets the codes of sign-ins older than the retry window
    /// (`SignInStore.replayWindowSeconds`): their retries are Apple's
    /// `invalid_grant` now. At most 10,000 per call.
    public func pruneSignInCodes() async throws {
        _ = try await count("""
            WITH gone AS (
                DELETE FROM siwa.sign_in_codes
                WHERE code_sha256 IN (SELECT code_sha256 FROM siwa.sign_in_codes
                                      WHERE created_at < now() - make_interval(secs => \(SignInStore.replayWindowSeconds)::float8)
                                      LIMIT 10000)
                RETURNING 1
            )
            SELECT count(*) FROM gone
            """)
    }
}

/// The step's record matched nothing (the lease was lost): roll the step back.
struct LeaseLostDuringStep: Error {}
