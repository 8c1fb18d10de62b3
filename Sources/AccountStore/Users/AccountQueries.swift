import Foundation
import Logging
import PostgresNIO

/// Read-side queries over siwa's tables.
public struct AccountQueries: Sendable {
    let client: PostgresClient
    /// A running job older than this (the worker's SIWA_JOB_MAX_RUN_SECONDS) is overdue.
    let jobMaxRunSeconds: Double

    public init(client: PostgresClient, jobMaxRunSeconds: Double = 900) {
        self.client = client
        self.jobMaxRunSeconds = jobMaxRunSeconds
    }

    /// Reachability check for `/readyz`. (Guarded, like every statement
    /// siwa runs: a connection that closes under it ends the wait.)
    public func ping(logger: Logger) async throws {
        try await client.withGuardedConnection { connection in
            _ = try await connection.query("SELECT 1", logger: logger).collect()
        }
    }

    /// The job queue at a glance, for `/metrics`: jobs per kind and state, how
    /// long the oldest runnable job has been waiting (0 if none), the
    /// oldest unfinished purge's age beside the purge SLA, and the
    /// running jobs that are overdue: attempted longer ago than the worker's
    /// maximum run time, or holding a lease that has expired (a worker that
    /// is stuck or gone, until a rescue).
    public func queueSnapshot(logger: Logger) async throws -> QueueSnapshot {
        try await client.withGuardedConnection { [jobMaxRunSeconds] connection in
            let rows = try await connection.query("""
                SELECT kind, state, count(*)::bigint,
                       coalesce(extract(epoch FROM now() - min(run_at) FILTER (
                           WHERE state IN ('available', 'retryable') AND run_at <= now())), 0)::float8,
                       count(*) FILTER (WHERE state = 'running' AND (
                           attempted_at < now() - make_interval(secs => \(jobMaxRunSeconds)::float8) OR locked_until < now()))::bigint,
                       coalesce(extract(epoch FROM now() - min(attempted_at) FILTER (WHERE state = 'running')), 0)::float8
                FROM siwa.jobs GROUP BY kind, state
                """, logger: logger)
            var snapshot = QueueSnapshot(jobs: [:], oldestRunnableSeconds: 0, runningOverdue: 0)
            for try await (kind, state, count, oldest, overdue, running) in rows.decode((String, String, Int64, Double, Int64, Double).self) {
                snapshot.jobs[kind, default: [:]][state] = Int(count)
                snapshot.oldestRunnableSeconds = max(snapshot.oldestRunnableSeconds, oldest)
                snapshot.runningOverdue += Int(overdue)
                snapshot.oldestRunningSeconds = max(snapshot.oldestRunningSeconds, running)
            }
            // Purges (not other kinds) against the SLA siwa.attention applies (SIWA_PURGE_SLA_HOURS, as migrated).
            let purges = try await connection.query("""
                -- A purge waiting out its grace delay counts from its due time.
                SELECT greatest(coalesce(extract(epoch FROM now() - min(coalesce((args->>'purge_after')::timestamptz, created_at))),
                                         0), 0)::float8,
                       (SELECT purge_sla_hours FROM siwa.report_settings)::float8 * 3600
                FROM siwa.jobs WHERE kind = 'purge_user' AND state IN ('available', 'running', 'retryable')
                """, logger: logger)
            for try await (oldest, sla) in purges.decode((Double, Double?).self) {
                snapshot.oldestPendingPurgeSeconds = oldest
                snapshot.purgeSLASeconds = sla
            }
            // The audit chain's sealed head, and how long the oldest row
            // after it has waited for the sealer (each on its primary key).
            let chain = try await connection.query("""
                SELECT h.seq, coalesce(extract(epoch FROM now() - (
                           SELECT l.occurred_at FROM siwa.audit_log AS l WHERE l.seq > coalesce(h.seq, 0) ORDER BY l.seq LIMIT 1)), 0)::float8
                FROM (SELECT) AS one
                LEFT JOIN LATERAL (SELECT seq FROM siwa.audit_chain ORDER BY seq DESC LIMIT 1) AS h ON true
                """, logger: logger)
            for try await (head, unsealed) in chain.decode((Int64?, Double).self) {
                snapshot.sealedHeadSeq = head ?? 0
                snapshot.oldestUnsealedSeconds = max(unsealed, 0)
            }
            return snapshot
        }
    }
}

public struct QueueSnapshot: Sendable {
    /// Jobs by kind, then by state (kinds with no job are absent).
    public var jobs: [String: [String: Int]]
    public var oldestRunnableSeconds: Double
    /// Running jobs past the maximum run time or with an expired lease.
    public var runningOverdue: Int
    /// How long ago the oldest running job's current attempt began (0: none running).
    public var oldestRunningSeconds: Double = 0
    /// How long ago the oldest unfinished purge was enqueued (0: none).
    public var oldestPendingPurgeSeconds: Double = 0
    /// SIWA_PURGE_SLA_HOURS as `siwa migrate` recorded it, in seconds.
    public var purgeSLASeconds: Double?
    /// The last sealed row of the audit chain (0: none sealed yet).
    public var sealedHeadSeq: Int64 = 0
    /// How long ago the oldest audit row not sealed yet was written (0: all sealed).
    public var oldestUnsealedSeconds: Double = 0
}
