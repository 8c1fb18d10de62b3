import Foundation
import Logging
import PostgresNIO

/// Deletes refused deliveries (`siwa.rejected_notifications`) past
/// SIWA_REJECTION_RETENTION_DAYS. `siwa worker` runs it on the worker that
/// leads maintenance (`RejectionPruner`), as the worker's role: serve's role
/// may only insert them (sql/020).
public struct RejectionRetention: Sendable {
    let client: PostgresClient
    let retentionDays: Int
    let logger: Logger
    /// Rows per statement, so the table is never locked long.
    static let batch = 10_000
    /// The longest one statement may take.
    static let statementSeconds = 30.0

    public init(client: PostgresClient, retentionDays: Int, logger: Logger) {
        self.client = client
        self.retentionDays = retentionDays
        self.logger = logger
    }

    /// Deletes the rows received before `now` minus the retention, a
    /// bounded batch per statement; returns how many. Throws on the first
    /// statement that fails or takes longer than 30 s (the rows deleted
    /// until then stay deleted).
    @discardableResult
    public func prune(now: Date = Date()) async throws -> Int {
        let cutoff = now.addingTimeInterval(-Double(retentionDays) * 86_400)
        let (client, logger) = (client, logger)
        var total = 0
        while true {
            let deleted = try await withTimeLimit(seconds: Self.statementSeconds) {
                try await client.withGuardedConnection { connection in
                    let rows = try await connection.query("""
                        WITH old AS (SELECT id FROM siwa.rejected_notifications WHERE received_at < \(cutoff) LIMIT \(Self.batch)),
                             gone AS (DELETE FROM siwa.rejected_notifications WHERE id IN (SELECT id FROM old) RETURNING 1)
                        SELECT count(*)::int8 FROM gone
                        """, logger: logger)
                    for try await count in rows.decode(Int64.self) { return Int(count) }
                    return 0
                }
            }
            total += deleted
            if deleted < Self.batch { return total }
        }
    }
}
