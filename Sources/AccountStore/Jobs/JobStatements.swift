import Foundation
import PostgresNIO

// The queue's hot statements, prepared once per connection. Each writes its
// own audit rows in the same statement, so the trail can never disagree with
// the queue. Each claim stamps the job with a lease of its own in
// `locked_by` (the worker's name, '/', a random UUID), and every statement
// that records progress or ends the hold is guarded by `locked_by = lease
// AND state = 'running'`: a run whose lease expired changes nothing, even
// when the same worker has claimed the job again since. A step is also
// recorded only if it is not recorded yet (`NOT steps_done ? step`).
// `siwa-bench` runs these same texts under pgbench for the worker's ceiling.

/// Claims up to `limit` runnable jobs of the given kinds, oldest `run_at`
/// first: one statement, `FOR UPDATE SKIP LOCKED`, so concurrent workers
/// never take the same job. It reads `siwa.jobs` alone: what a kind needs
/// besides its args, it looks up itself, for a claimed batch at once
/// (JobKindRunner.runBatchStep). Each kind is picked by its own scan of
/// `jobs_runnable_idx (kind, run_at, id)`, which stays an ordered index
/// scan that stops at `limit` (`kind = ANY(...)` would sort every runnable
/// job of those kinds first); the rows a kind's scan locked beyond the
/// final `limit` are let go when the statement ends.
public struct ClaimJobsStatement: PostgresPreparedStatement {
    public static let name = "siwa_claim_jobs_v6"
    public static let sql = """
        WITH picked AS (
            SELECT job.id FROM unnest($3::text[]) AS k(kind),
                 LATERAL (SELECT id, run_at FROM siwa.jobs
                          WHERE state IN ('available', 'retryable') AND run_at <= now() AND kind = k.kind
                          ORDER BY run_at, id
                          LIMIT $2::integer
                          FOR UPDATE SKIP LOCKED) AS job
            ORDER BY job.run_at, job.id
            LIMIT $2::integer
        ), claimed AS (
            UPDATE siwa.jobs AS j
            SET state = 'running', attempt = j.attempt + 1, locked_by = $1::text || '/' || gen_random_uuid(),
                locked_until = now() + make_interval(secs => $4::float8), attempted_at = now()
            FROM picked WHERE j.id = picked.id
            RETURNING j.id, j.kind, j.args, j.attempt, j.max_attempts, j.steps_done, j.locked_by
        ), audit AS (
            \(JobAuditRow.insert)
            SELECT 'worker', 'job.claimed', \(JobAuditRow.user("args")),
                   jsonb_build_object('job_id', id, 'kind', kind, 'attempt', attempt, 'worker', locked_by)
            FROM claimed
        )
        SELECT claimed.id, claimed.kind, claimed.attempt, claimed.max_attempts,
               ARRAY(SELECT jsonb_object_keys(claimed.steps_done)) AS steps_done, claimed.locked_by AS lease,
               claimed.args::text AS args
        FROM claimed
        ORDER BY claimed.id
        """
    public typealias Row = ClaimedJob

    public var worker: String
    public var limit: Int
    public var kinds: [String]
    public var leaseSeconds: Double

    public init(worker: String, limit: Int, kinds: [String], leaseSeconds: Double) {
        self.worker = worker
        self.limit = limit
        self.kinds = kinds
        self.leaseSeconds = leaseSeconds
    }

    public func makeBindings() throws -> PostgresBindings {
        var b = PostgresBindings(capacity: 4)
        b.append(worker)
        b.append(Int32(clamping: limit))
        b.append(kinds)
        b.append(leaseSeconds)
        return b
    }

    public func decodeRow(_ row: PostgresRow) throws -> ClaimedJob {
        let (id, kind, attempt, maxAttempts, steps, lease, args) =
            try row.decode((Int64, String, Int32, Int32, [String], String, String).self)
        return ClaimedJob(id: id, kind: kind, attempt: Int(attempt), maxAttempts: Int(maxAttempts), lease: lease,
                          stepsDone: Set(steps), args: Data(args.utf8))
    }
}

/// Records one completed plan step (and, for the last one, the job's
/// completion) with its audit rows. Run it last in the step's own
/// transaction on siwa's database and the step takes effect exactly once:
/// it matches (returns 1) only while the run holds its lease and the step is
/// not recorded yet; otherwise it returns 0 and the caller rolls the step
/// back (JobQueue.inStepTransaction).
public struct RecordStepStatement: PostgresPreparedStatement {
    public static let name = "siwa_record_job_step_v3"

    /// `job` (the guarded update, returning id, subject, attempt) and
    /// `audit` CTEs; $1 job id, $2 lease, $3 step name, $4 completes the job.
    static let recordingCTEs = """
        job AS (
            UPDATE siwa.jobs
            SET steps_done = steps_done || jsonb_build_object($3::text, now()),
                state = CASE WHEN $4::boolean THEN 'completed' ELSE state END,
                finalized_at = CASE WHEN $4::boolean THEN now() END,
                locked_until = CASE WHEN $4::boolean THEN NULL ELSE locked_until END
            WHERE id = $1::bigint AND locked_by = $2::text AND state = 'running' AND NOT steps_done ? $3::text
            RETURNING id, \(JobAuditRow.subject("args")), attempt
        ), audit AS (
            \(JobAuditRow.insert)
            SELECT 'worker', outcome.action, \(JobAuditRow.subjectColumns("job")),
                   jsonb_build_object('job_id', job.id, 'attempt', job.attempt, 'worker', $2::text) || outcome.details
            FROM job, (VALUES (1, 'job.step_completed', jsonb_build_object('step', $3::text)),
                              (2, 'job.completed', '{}'::jsonb)) AS outcome(position, action, details)
            WHERE outcome.position = 1 OR $4::boolean
            ORDER BY outcome.position
        )
        """

    public static let sql = "WITH \(recordingCTEs)\nSELECT count(*) FROM job"
    public typealias Row = Int64

    public var step: JobStep

    public init(_ step: JobStep) { self.step = step }

    public func makeBindings() throws -> PostgresBindings { step.bindings() }

    public func decodeRow(_ row: PostgresRow) throws -> Int64 { try row.decode(Int64.self) }
}

/// Which job (and its kind, for its completion hook), under which lease,
/// which step, and whether it is the last.
public struct JobStep: Sendable {
    public var jobID: Int64
    public var kind: String
    public var lease: String
    public var name: String
    public var completesJob: Bool

    public init(jobID: Int64, kind: String, lease: String, name: String, completesJob: Bool) {
        self.jobID = jobID
        self.kind = kind
        self.lease = lease
        self.name = name
        self.completesJob = completesJob
    }

    /// Step `name` of the claimed `job`, under its lease.
    public init(_ job: ClaimedJob, name: String, completesJob: Bool) {
        self.init(jobID: job.id, kind: job.kind, lease: job.lease, name: name, completesJob: completesJob)
    }

    func bindings() -> PostgresBindings {
        var b = PostgresBindings(capacity: 4)
        b.append(jobID)
        b.append(lease)
        b.append(name)
        b.append(completesJob)
        return b
    }
}
