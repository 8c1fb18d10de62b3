import Foundation
import Logging
import PostgresNIO

/// Read-side queries over siwa's tables.
public struct AccountQueries: Sendable {
    let client: PostgresClient

    public init(client: PostgresClient) { self.client = client }

    /// Reachability check for `/readyz`. (Guarded, like every statement
    /// siwa runs: a connection that closes under it ends the wait.)
    public func ping(logger: Logger) async throws {
        try await client.withGuardedConnection { connection in
            _ = try await connection.query("SELECT 1", logger: logger).collect()
        }
    }

    /// The purge queue at a glance, for `/metrics`: jobs per state, and how
    /// long the oldest runnable job has been waiting (0 if none).
    public func queueSnapshot(logger: Logger) async throws -> QueueSnapshot {
        try await client.withGuardedConnection { connection in
            let rows = try await connection.query("""
                SELECT state, count(*)::bigint,
                       coalesce(extract(epoch FROM now() - min(run_at) FILTER (
                           WHERE state IN ('available', 'retryable') AND run_at <= now())), 0)::float8
                FROM siwa.jobs GROUP BY state
                """, logger: logger)
            var snapshot = QueueSnapshot(jobsByState: [:], oldestRunnableSeconds: 0)
            for try await (state, count, oldest) in rows.decode((String, Int64, Double).self) {
                snapshot.jobsByState[state] = Int(count)
                snapshot.oldestRunnableSeconds = max(snapshot.oldestRunnableSeconds, oldest)
            }
            return snapshot
        }
    }
}

public struct QueueSnapshot: Sendable {
    public var jobsByState: [String: Int]
    public var oldestRunnableSeconds: Double
}
