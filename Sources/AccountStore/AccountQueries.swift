import Foundation
import Logging
import PostgresNIO

/// A user row as admins (and tests, and the demo) read it.
public struct UserRecord: Sendable, Equatable {
    public let id: Int64
    public let appleSub: String
    public let status: UserStatus
    public let emailForwardingEnabled: Bool
    public let emailEventTime: Int64?
    public let hasEmail: Bool
}

/// Read-side queries over siwa's tables.
public struct AccountQueries: Sendable {
    let client: PostgresClient
    /// A running job older than this (the worker's SIWA_JOB_MAX_RUN_SECONDS) is overdue.
    let jobMaxRunSeconds: Double

    public init(client: PostgresClient, jobMaxRunSeconds: Double = 900) {
        self.client = client
        self.jobMaxRunSeconds = jobMaxRunSeconds
    }

    /// Reachability check for `/readyz`.
    public func ping(logger: Logger) async throws {
        try await client.query("SELECT 1", logger: logger)
    }

    public func user(appleSub: String, logger: Logger) async throws -> UserRecord? {
        let rows = try await client.query("""
            SELECT id, apple_sub, status, email_forwarding_enabled, email_event_time, email IS NOT NULL
            FROM siwa.users WHERE apple_sub = \(appleSub)
            """, logger: logger)
        for try await (id, sub, status, forwarding, eventTime, hasEmail) in rows.decode((Int64, String, String, Bool, Int64?, Bool).self) {
            return UserRecord(id: id, appleSub: sub, status: UserStatus(rawValue: status) ?? .active,
                              emailForwardingEnabled: forwarding, emailEventTime: eventTime, hasEmail: hasEmail)
        }
        return nil
    }

    public func count(_ table: CountedTable, logger: Logger) async throws -> Int {
        let rows = try await client.query(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table.rawValue)"), logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// The purge queue at a glance, for `/metrics`: jobs per state, how
    /// long the oldest runnable job has been waiting (0 if none), and the
    /// running jobs that are overdue: attempted longer ago than the worker's
    /// maximum run time, or holding a lease that has expired (a worker that
    /// is stuck or gone, until a rescue).
    public func queueSnapshot(logger: Logger) async throws -> QueueSnapshot {
        let rows = try await client.query("""
            SELECT state, count(*)::bigint,
                   coalesce(extract(epoch FROM now() - min(run_at) FILTER (
                       WHERE state IN ('available', 'retryable') AND run_at <= now())), 0)::float8,
                   count(*) FILTER (WHERE state = 'running' AND (
                       attempted_at < now() - make_interval(secs => \(jobMaxRunSeconds)::float8) OR locked_until < now()))::bigint
            FROM siwa.jobs GROUP BY state
            """, logger: logger)
        var snapshot = QueueSnapshot(jobsByState: [:], oldestRunnableSeconds: 0, runningOverdue: 0)
        for try await (state, count, oldest, overdue) in rows.decode((String, Int64, Double, Int64).self) {
            snapshot.jobsByState[state] = Int(count)
            snapshot.oldestRunnableSeconds = max(snapshot.oldestRunnableSeconds, oldest)
            snapshot.runningOverdue += Int(overdue)
        }
        return snapshot
    }

    public func pendingPurgeJobs(appleSub: String, logger: Logger) async throws -> Int {
        let rows = try await client.query("""
            SELECT count(*) FROM siwa.jobs
            WHERE kind = 'purge_user' AND args->>'apple_sub' = \(appleSub) AND state IN ('available', 'running', 'retryable')
            """, logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }
}

public struct QueueSnapshot: Sendable {
    public var jobsByState: [String: Int]
    public var oldestRunnableSeconds: Double
    /// Running jobs past the maximum run time or with an expired lease.
    public var runningOverdue: Int
}

/// Tables whose sizes are reported (a closed list: the name goes into SQL).
public enum CountedTable: String, Sendable, CaseIterable {
    case users = "siwa.users"
    case notifications = "siwa.notifications"
    case rejectedNotifications = "siwa.rejected_notifications"
    case jobs = "siwa.jobs"
    case auditLog = "siwa.audit_log"
}
