import Foundation
import Logging
import PostgresNIO

/// One completed erasure as the erasure ledger keeps it, outside the
/// database: the Apple `sub`, siwa's job id, when the job completed and the
/// id of its deletion receipt (the receipt's `jti`; nil with receipts off).
/// No email, name or token.
public struct ErasureRecord: Sendable, Equatable {
    public let sub: String
    public let jobID: Int64
    public let completedAt: Date
    public let receiptID: String?

    public init(sub: String, jobID: Int64, completedAt: Date, receiptID: String?) {
        self.sub = sub
        self.jobID = jobID
        self.completedAt = completedAt
        self.receiptID = receiptID
    }
}

/// Where the worker appends the erasures a transaction completes, durably,
/// before that transaction commits (AccountEvents' ErasureLedger). A throw
/// fails the completion: no erasure completes without its ledger line.
public protocol ErasureLedgerWriting: Sendable {
    func append(_ records: [ErasureRecord]) throws
}

extension JobQueue {
    /// The erasures among `jobIDs` that the transaction on `connection` has
    /// just completed, appended to the ledger before it commits. Called
    /// after the receipts are written, so each record carries its
    /// receipt's id. A token-only sign-out (args.scope `tokens`) erases
    /// nothing and has no line.
    func recordErasures(for jobIDs: [Int64], on connection: PostgresConnection) async throws {
        guard let ledger, !jobIDs.isEmpty else { return }
        let rows = try await connection.query("""
            SELECT j.id, j.args->>'apple_sub', extract(epoch FROM j.finalized_at)::float8,
                   (SELECT r.jti FROM siwa.deletion_receipts AS r WHERE r.job_id = j.id)
            FROM siwa.jobs AS j
            WHERE j.id = ANY(\(jobIDs)::bigint[]) AND j.kind = 'purge_user' AND j.state = 'completed'
              AND j.args->>'scope' IS DISTINCT FROM 'tokens' AND j.args->>'apple_sub' <> ''
            ORDER BY j.id
            """, logger: logger)
        var records: [ErasureRecord] = []
        for try await (id, sub, completed, receipt) in rows.decode((Int64, String, Double, String?).self) {
            records.append(ErasureRecord(sub: sub, jobID: id, completedAt: Date(timeIntervalSince1970: completed), receiptID: receipt))
        }
        guard !records.isEmpty else { return }
        try ledger.append(records)
    }
}
