import Foundation
import Logging
import PostgresNIO

/// One completed erasure as the erasure ledger keeps it, outside the
/// database: the Apple `sub`, siwa's job id, when the job completed and the
/// id of its deletion receipt (the receipt's `jti`; nil with receipts off).
/// No email, name or token.
public struct ErasureRecord: Sendable, Equatable {
    public let sub: String
    /// The team `sub` belongs to.
    public let team: String
    public let jobID: Int64
    public let completedAt: Date
    public let receiptID: String?

    public init(sub: String, team: String, jobID: Int64, completedAt: Date, receiptID: String?) {
        self.sub = sub
        self.team = team
        self.jobID = jobID
        self.completedAt = completedAt
        self.receiptID = receiptID
    }
}

/// Where the worker appends the erasures a transaction completes, durably,
/// before that transaction commits (AccountLifecycle's ErasureLedger). A throw
/// fails the completion: no erasure completes without its ledger line.
public protocol ErasureLedgerWriting: Sendable {
    func append(_ records: [ErasureRecord]) throws
}

/// The purge's completion hook (`JobCompletionHook`): in the transaction
/// that completes purges, before it commits, their deletion receipts
/// (DeletionReceipts.issue), then their erasure ledger lines, so each line
/// carries its receipt's id. The queue runs it for `purge_user` jobs only.
public struct PurgeCompletion: JobCompletionHook {
    /// Signs a receipt for each purge as it completes (nil: receipts are off).
    let receipts: (any ReceiptSigning)?
    /// Where each completed erasure is appended before it commits (nil: no
    /// ledger, as in tests of the queue alone; `siwa worker` always has one).
    let ledger: (any ErasureLedgerWriting)?

    public init(receipts: (any ReceiptSigning)?, ledger: (any ErasureLedgerWriting)?) {
        self.receipts = receipts
        self.ledger = ledger
    }

    /// For `JobQueue(completionHooks:)`: this hook, for the purge's kind.
    public static func hooks(receipts: (any ReceiptSigning)?, ledger: (any ErasureLedgerWriting)?) -> [String: any JobCompletionHook] {
        [PurgeParameters.kind: PurgeCompletion(receipts: receipts, ledger: ledger)]
    }

    public func jobsCompleted(_ jobIDs: [Int64], on connection: PostgresConnection, logger: Logger) async throws {
        if let receipts {
            try await DeletionReceipts.issue(for: jobIDs, signer: receipts, on: connection, logger: logger)
        }
        if let ledger {
            try await Self.recordErasures(for: jobIDs, in: ledger, on: connection, logger: logger)
        }
    }

    /// The erasures among `jobIDs` that the transaction on `connection` has
    /// just completed, appended to the ledger before it commits. Called
    /// after the receipts are written, so each record carries its
    /// receipt's id. A token-only sign-out (args.scope `tokens`) erases
    /// nothing and has no line.
    static func recordErasures(for jobIDs: [Int64], in ledger: any ErasureLedgerWriting, on connection: PostgresConnection,
                               logger: Logger) async throws {
        guard !jobIDs.isEmpty else { return }
        let rows = try await connection.query("""
            SELECT j.id, j.args->>'apple_sub', j.args->>'apple_team', extract(epoch FROM j.finalized_at)::float8,
                   (SELECT r.jti FROM siwa.deletion_receipts AS r WHERE r.job_id = j.id)
            FROM siwa.jobs AS j
            WHERE j.id = ANY(\(jobIDs)::bigint[]) AND j.kind = \(PurgeParameters.kind) AND j.state = 'completed'
              AND j.args->>'scope' IS DISTINCT FROM 'tokens' AND j.args->>'apple_sub' <> ''
            ORDER BY j.id
            """, logger: logger)
        var records: [ErasureRecord] = []
        for try await (id, sub, team, completed, receipt) in rows.decode((Int64, String, String, Double, String?).self) {
            records.append(ErasureRecord(sub: sub, team: team, jobID: id, completedAt: Date(timeIntervalSince1970: completed), receiptID: receipt))
        }
        guard !records.isEmpty else { return }
        try ledger.append(records)
    }
}
