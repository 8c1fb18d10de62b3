import Foundation
import Logging
import PostgresNIO

// The purge's own SQL (kind `purge_user`), together: the look-up of the
// users a claimed batch is about, with the locks the built-in step takes
// first, and that step for the whole batch. The rest of a purge (its record,
// its completion) goes through the queue's statements for every kind
// (JobStatements.swift, JobQueue); its receipt and ledger line are its
// completion hook (PurgeCompletion); enqueueing is `siwa.enqueue_purge`
// (sql/008).

/// What a purge needs to know of its user besides its args, looked up for
/// a claimed batch at once (`PurgeQueue.lookUpAndErase`, `targets`).
public struct PurgeTarget: Sendable, Equatable {
    /// siwa's `users.id` for the sub, if it has a row.
    public let userID: Int64?
    /// The user has stored Apple tokens: they are revoked before anything is erased.
    public let holdsTokens: Bool

    public init(userID: Int64?, holdsTokens: Bool) {
        self.userID = userID
        self.holdsTokens = holdsTokens
    }
}

/// The purge's side of the queue: its look-ups and its built-in step, on
/// the queue it runs on (whose completion hook for purges,
/// `PurgeCompletion`, writes their receipts and ledger lines).
public struct PurgeQueue: Sendable {
    public let jobs: JobQueue

    public init(jobs: JobQueue) {
        self.jobs = jobs
    }

    /// For each job of `$1` (ids): its user's id and whether they hold
    /// Apple tokens, the users locked first, in (sub, team) order (the erase runs
    /// after it, in the same transaction: see `lookUpAndErase`). One index
    /// probe per sub, as in RecordNotificationStatement: LIMIT keeps the
    /// lookup from becoming a hash join over every user. MATERIALIZED: the
    /// locks are taken in the CTE's own order, whatever the plan around it.
    public static let lockUsersSQL = """
        WITH locked AS MATERIALIZED (
            SELECT job.apple_sub, job.apple_team, u.id
            FROM (SELECT DISTINCT args->>'apple_sub' AS apple_sub, args->>'apple_team' AS apple_team
                  FROM siwa.jobs WHERE id = ANY($1::bigint[]) ORDER BY 1, 2) AS job,
                 LATERAL (SELECT users.id FROM siwa.users
                          WHERE users.apple_sub = job.apple_sub AND users.apple_team = job.apple_team LIMIT 1 FOR UPDATE) AS u
        )
        SELECT j.id, locked.id, EXISTS (SELECT FROM siwa.apple_tokens AS t WHERE t.user_id = locked.id)
        FROM siwa.jobs AS j
        LEFT JOIN locked ON locked.apple_sub = j.args->>'apple_sub' AND locked.apple_team = j.args->>'apple_team'
        WHERE j.id = ANY($1::bigint[])
        """

    /// The same look-up without the locks, for jobs that run without the
    /// batch step (one statement for all of them).
    static let targetsSQL = """
        SELECT j.id, u.id, EXISTS (SELECT FROM siwa.apple_tokens AS t WHERE t.user_id = u.id)
        FROM siwa.jobs AS j
        LEFT JOIN LATERAL (SELECT users.id FROM siwa.users
                           WHERE users.apple_sub = j.args->>'apple_sub' AND users.apple_team = j.args->>'apple_team'
                           LIMIT 1) AS u ON true
        WHERE j.id = ANY($1::bigint[])
        """

    static func targets(_ sql: String, of jobIDs: [Int64], on connection: PostgresConnection,
                        logger: Logger) async throws -> [Int64: PurgeTarget] {
        var binds = PostgresBindings(capacity: 1)
        binds.append(jobIDs)
        var targets: [Int64: PurgeTarget] = [:]
        // Read to its end: an error while it waits for a lock (its
        // lock_timeout) arrives with the rows, and unread it would surface
        // as the erase's "transaction aborted" instead (which PostgresNIO
        // then keeps for the erase's prepared statement on this connection).
        let rows = try await connection.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger)
        for try await (id, userID, holdsTokens) in rows.decode((Int64, Int64?, Bool).self) {
            targets[id] = PurgeTarget(userID: userID, holdsTokens: holdsTokens)
        }
        return targets
    }

    /// The users of `jobIDs` (not locked): for jobs that did not get them
    /// from the batch step.
    public func targets(of jobIDs: [Int64]) async throws -> [Int64: PurgeTarget] {
        guard !jobIDs.isEmpty else { return [:] }
        return try await jobs.client.withGuardedConnection { [logger = jobs.logger] connection in
            try await Self.targets(Self.targetsSQL, of: jobIDs, on: connection, logger: logger)
        }
    }

    /// A run the built-in step is to do now, and whether it is the job's last step.
    public struct Erase: Sendable {
        public let id: Int64
        public let lease: String
        public let completes: Bool

        public init(id: Int64, lease: String, completes: Bool) {
            self.id = id
            self.lease = lease
            self.completes = completes
        }
    }

    /// The batch step's one transaction: looks up the users of `jobIDs`,
    /// locking them (`lockUsersSQL`), lets `choose` pick from what it found
    /// the runs to erase, erases them (ErasePersonalDataStatement, each
    /// recorded with it) and runs the completion hook for those it
    /// completed. Returns the users found, by job, the runs `choose`
    /// picked, and the ids among them whose step was done (the others'
    /// leases were lost).
    public func lookUpAndErase(_ jobIDs: [Int64], choose: @escaping @Sendable ([Int64: PurgeTarget]) -> [Erase])
        async throws -> (targets: [Int64: PurgeTarget], chosen: [Erase], erased: Set<Int64>) {
        guard !jobIDs.isEmpty else { return ([:], [], []) }
        let jobs = jobs
        let logger = jobs.logger
        return try await jobs.client.withGuardedTransaction(logger: logger) { connection in
            // First lock the users, in a statement of its own: it waits for
            // a notification being recorded for them to commit, so the erase
            // (a new snapshot) sees that notification's email. The receiver
            // takes the same locks before it decides to keep an email (see
            // RecordNotificationStatement), and both lock users before jobs.
            let targets = try await Self.targets(Self.lockUsersSQL, of: jobIDs, on: connection, logger: logger)
            let runs = choose(targets)
            guard !runs.isEmpty else { return (targets, runs, []) }
            let statement = ErasePersonalDataStatement(jobIDs: runs.map(\.id), leases: runs.map(\.lease),
                                                       completes: runs.map(\.completes))
            var done = Set<Int64>()
            for try await id in try await connection.execute(statement, logger: logger) { done.insert(id) }
            try await jobs.jobsCompleted(runs.filter { $0.completes && done.contains($0.id) }.map(\.id),
                                         kind: PurgeParameters.kind, on: connection)
            return (targets, runs, done)
        }
    }

    /// The built-in purge step for several runs in one transaction (each
    /// recorded with it; `completes` marks jobs for which it is the last
    /// step). Returns the ids whose step was done; the others' leases were lost.
    public func erasePersonalData(_ runs: [(id: Int64, lease: String)], completes: [Bool]) async throws -> Set<Int64> {
        let erase = zip(runs, completes).map { Erase(id: $0.0.id, lease: $0.0.lease, completes: $0.1) }
        return try await lookUpAndErase(runs.map(\.id)) { _ in erase }.erased
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
    public static let name = "siwa_erase_personal_data_v5"
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
                              WHERE u.apple_sub = j.args->>'apple_sub' AND u.apple_team = j.args->>'apple_team')
            RETURNING j.id, j.args->>'apple_sub' AS apple_sub, j.args->>'apple_team' AS apple_team, j.attempt, j.locked_by,
                      input.completes
        ), audit AS (
            INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
            SELECT 'worker', outcome.action, job.apple_sub, job.apple_team,
                   jsonb_build_object('job_id', job.id, 'attempt', job.attempt, 'worker', job.locked_by) || outcome.details
            FROM job, (VALUES (1, 'job.step_completed', jsonb_build_object('step', '\(stepName)')),
                              (2, 'job.completed', '{}'::jsonb)) AS outcome(position, action, details)
            WHERE outcome.position = 1 OR job.completes
            ORDER BY job.id, outcome.position
        ), account AS (
            UPDATE siwa.users AS u SET email = NULL, is_private_email = NULL, email_verified = NULL, given_name = NULL, family_name = NULL,
                                       org_id = NULL, transfer_sub = NULL,
                                       purged_at = now(), updated_at = now()
            FROM job WHERE u.apple_sub = job.apple_sub AND u.apple_team = job.apple_team
        ), codes AS (
            -- The replay cache's codes of this user (found by sub, its
            -- index; the team's user by id), not those of the same sub in
            -- another team.
            DELETE FROM siwa.sign_in_codes AS c USING job, siwa.users AS u
            WHERE c.apple_sub = job.apple_sub AND u.apple_sub = job.apple_sub AND u.apple_team = job.apple_team AND c.user_id = u.id
        ), inbox AS (
            UPDATE siwa.notifications AS n SET claims = n.claims #- '{events,email}'
            FROM job WHERE n.apple_sub = job.apple_sub AND n.apple_team = job.apple_team AND n.claims->'events' ? 'email'
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
