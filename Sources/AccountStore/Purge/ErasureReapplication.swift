import Logging
import PostgresNIO

/// `siwa erasures reapply`'s side of the database: one call of
/// `siwa.reapply_erasure` (sql/016, SECURITY DEFINER, EXECUTE for
/// siwa_admin) per ledger line, which decides, enqueues the purge through
/// siwa.enqueue_purge and writes the `erasure.reapplied` audit row.
public struct ErasureReapplication: Sendable {
    public enum Outcome: String, Sendable, CaseIterable {
        /// A new purge job.
        case enqueued
        /// Merged into the sub's purge that was already pending.
        case pending
        /// The restored database shows this erasure done.
        case alreadyErased = "already_erased"
        /// An earlier reapply since the restore took this line already.
        case alreadyReapplied = "already_reapplied"
    }

    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The decision for one line and the job it concerns (nil when none);
    /// with `dryRun` nothing is written.
    public func reapply(sub: String, team: String, ledgerJobID: Int64, receiptID: String?,
                        dryRun: Bool) async throws -> (outcome: Outcome, jobID: Int64?) {
        let rows = try await client.guardedQuery("""
            SELECT outcome, reapplied_job_id FROM siwa.reapply_erasure(\(sub), \(team), \(ledgerJobID), \(receiptID), \(dryRun))
            """, logger: logger)
        guard let row = rows.first else { throw ErasureReapplicationError("siwa.reapply_erasure answered no row") }
        let (text, jobID) = try row.decode((String, Int64?).self)
        guard let outcome = Outcome(rawValue: text) else { throw ErasureReapplicationError("siwa.reapply_erasure answered \(text)") }
        return (outcome, jobID)
    }
}

public struct ErasureReapplicationError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
