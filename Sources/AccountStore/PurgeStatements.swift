import Foundation
import PostgresNIO

// The purge's own SQL (kind `purge_user`), together: its built-in step for
// a claimed batch, and the user locks that step takes first. The rest of a
// purge (its record, its completion, its receipt) goes through the queue's
// statements for every kind (JobStatements.swift, JobQueue) and
// DeletionReceipts; enqueueing is `siwa.enqueue_purge` (sql/008).

extension JobQueue {
    /// Locks the users of the jobs `$1` (ids), in sub order; the erase runs
    /// after it, in the same transaction (see `erasePersonalData`). One
    /// index probe per sub, as in RecordNotificationStatement: LIMIT keeps
    /// the lookup from becoming a hash join over every user.
    public static let lockUsersSQL = """
        SELECT FROM (SELECT DISTINCT args->>'apple_sub' AS apple_sub FROM siwa.jobs WHERE id = ANY($1::bigint[]) ORDER BY 1) AS job,
             LATERAL (SELECT FROM siwa.users WHERE users.apple_sub = job.apple_sub LIMIT 1 FOR UPDATE) AS u
        """

    /// The built-in purge step for several runs in one statement (each
    /// recorded with it; `completes` marks jobs for which it is the last
    /// step). Returns the ids whose step was done; the others' leases were lost.
    public func erasePersonalData(_ runs: [(id: Int64, lease: String)], completes: [Bool]) async throws -> Set<Int64> {
        guard !runs.isEmpty else { return [] }
        let statement = ErasePersonalDataStatement(jobIDs: runs.map(\.id), leases: runs.map(\.lease), completes: completes)
        let logger = logger
        return try await client.withGuardedTransaction(logger: logger) { connection in
            // First lock the users, in a statement of its own: it waits for
            // a notification being recorded for them to commit, so the erase
            // (a new snapshot) sees that notification's email. The receiver
            // takes the same locks before it decides to keep an email (see
            // RecordNotificationStatement), and both lock users before jobs.
            // Read to its end: an error while it waits (its lock_timeout)
            // arrives with the rows, and unread it would surface as the
            // erase's "transaction aborted" instead (which PostgresNIO then
            // keeps for the erase's prepared statement on this connection).
            for try await _ in try await connection.query(PostgresQuery(unsafeSQL: Self.lockUsersSQL, binds: {
                var binds = PostgresBindings(capacity: 1)
                binds.append(runs.map(\.id))
                return binds
            }()), logger: logger) {}
            var done = Set<Int64>()
            for try await id in try await connection.execute(statement, logger: logger) { done.insert(id) }
            try await recordCompletedPurges(for: runs.indices.filter { completes[$0] && done.contains(runs[$0].id) }.map { runs[$0].id },
                                    on: connection)
            return done
        }
    }
}

/// The built-in first step of every purge, for a whole claimed batch in one
/// statement: erase siwa's own personal data for each user (email,
/// private-relay flag, names, retried sign-in codes; the email in each
/// recorded notification), keeping the
/// tombstone row with the `sub` and its status. Each job's step is recorded
/// (guarded, as in RecordStepStatement) together with it, and a job whose
/// plan has no other step is completed by it too.
public struct ErasePersonalDataStatement: PostgresPreparedStatement {
    public static let stepName = "siwa.erase_personal_data"
    public static let name = "siwa_erase_personal_data_v4"
    public static let sql = """
        WITH input AS (
            SELECT * FROM unnest($1::bigint[], $2::text[], $3::boolean[]) AS i(job_id, lease, completes)
        ), job AS (
            UPDATE siwa.jobs AS j
            SET steps_done = j.steps_done || jsonb_build_object('\(stepName)', now()),
                state = CASE WHEN input.completes THEN 'completed' ELSE j.state END,
                finalized_at = CASE WHEN input.completes THEN now() END,
                locked_until = CASE WHEN input.completes THEN NULL ELSE j.locked_until END
            FROM input
            WHERE j.id = input.job_id AND j.locked_by = input.lease AND j.state = 'running'
              AND NOT j.steps_done ? '\(stepName)'
              -- Never erase a token before Apple revoked it: the revocation
              -- step deletes the tokens it revoked; while one is left, the
              -- erase waits (the runner revokes first, see PurgeJobRunner).
              AND NOT EXISTS (SELECT FROM siwa.users AS u JOIN siwa.apple_tokens AS t ON t.user_id = u.id
                              WHERE u.apple_sub = j.args->>'apple_sub')
            RETURNING j.id, j.args->>'apple_sub' AS apple_sub, j.attempt, j.locked_by, input.completes
        ), audit AS (
            INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
            SELECT 'worker', outcome.action, job.apple_sub,
                   jsonb_build_object('job_id', job.id, 'attempt', job.attempt, 'worker', job.locked_by) || outcome.details
            FROM job, (VALUES (1, 'job.step_completed', jsonb_build_object('step', '\(stepName)')),
                              (2, 'job.completed', '{}'::jsonb)) AS outcome(position, action, details)
            WHERE outcome.position = 1 OR job.completes
            ORDER BY job.id, outcome.position
        ), account AS (
            UPDATE siwa.users AS u SET email = NULL, is_private_email = NULL, given_name = NULL, family_name = NULL,
                                       purged_at = now(), updated_at = now()
            FROM job WHERE u.apple_sub = job.apple_sub
        ), codes AS (
            DELETE FROM siwa.sign_in_codes AS c USING job WHERE c.apple_sub = job.apple_sub
        ), inbox AS (
            UPDATE siwa.notifications AS n SET claims = n.claims #- '{events,email}'
            FROM job WHERE n.apple_sub = job.apple_sub AND n.claims->'events' ? 'email'
        )
        SELECT id FROM job
        """
    /// A job whose step was done (still held by this worker).
    public typealias Row = Int64

    public var jobIDs: [Int64]
    public var leases: [String]
    /// Per job: this step is its last, so the job completes.
    public var completes: [Bool]

    public init(jobIDs: [Int64], leases: [String], completes: [Bool]) {
        self.jobIDs = jobIDs
        self.leases = leases
        self.completes = completes
    }

    public func makeBindings() throws -> PostgresBindings {
        var b = PostgresBindings(capacity: 3)
        b.append(jobIDs)
        b.append(leases)
        b.append(completes)
        return b
    }

    public func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Int64.self) }
}
