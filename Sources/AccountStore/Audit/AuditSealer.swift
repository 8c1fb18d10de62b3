import Foundation
import Logging
import NIOCore
import PostgresNIO

/// Appends the hashes of `siwa.audit_log`'s final rows to `siwa.audit_chain`,
/// in seq order (`AuditChain`). The `siwa worker` that leads maintenance
/// calls it each second; an advisory lock per transaction lets one sealer
/// at a time through all the same (a leader on its way out, a test), so
/// whoever seals (and any number of serve processes and admins writing
/// rows) makes one chain.
///
/// A row is final once no transaction that could still commit a lower seq
/// runs: seqs are handed out after the writer's transaction id
/// (sql/009_audit_chain.sql), so the mark `(seq S, transaction X)`, with S
/// read before X took its id, says every row up to S is committed or gone
/// for good once every audit writer older than X has ended
/// (`markIsFinal`). Each pass seals up to the previous pass's mark and
/// leaves a new one.
public struct AuditSealer: Sendable {
    let client: PostgresClient
    let logger: Logger
    /// `pg_try_advisory_xact_lock` key ("SIWA" 0009; the migrator's is 0001).
    static let lockKey: Int64 = 0x5157_4100_0009

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Whether the mark `m` (seq, xid) is final: no transaction older than
    /// `m.xid` that may still commit an audit row is running. Only a
    /// transaction that has drawn a seq can commit one below the mark, and
    /// it holds a lock on `siwa.audit_log` (its INSERT's) until it ends; so
    /// the running transactions that count are those holding such a lock in
    /// this database, not every transaction on the cluster (a long one in
    /// another database, or a reader here, does not hold sealing back).
    /// pg_locks gives their 32-bit xids; the snapshot's running list
    /// (xid8) gives their age, matched on the low 32 bits.
    static let markIsFinal = """
        NOT EXISTS (
            SELECT 1 FROM pg_snapshot_xip(pg_current_snapshot()) AS running(xid)
            WHERE running.xid < m.xid
              AND (running.xid::text::numeric % 4294967296)::bigint IN (
                  SELECT holder.transactionid::text::bigint
                  FROM pg_locks AS used
                  JOIN pg_locks AS holder ON holder.virtualtransaction = used.virtualtransaction
                                         AND holder.locktype = 'transactionid'
                  WHERE used.locktype = 'relation' AND used.relation = 'siwa.audit_log'::regclass
                    AND used.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND used.mode NOT IN ('AccessShareLock', 'RowShareLock')))
        """

    /// Seals at most `maxRows` final rows after the head; returns how many
    /// (0: none final yet, or another sealer is at work).
    @discardableResult
    public func seal(maxRows: Int = 5000) async throws -> Int {
        try await client.withGuardedTransaction(logger: logger) { connection in
            try await Self.seal(on: connection, maxRows: maxRows, logger: logger)
        }
    }

    private static func seal(on connection: PostgresConnection, maxRows: Int, logger: Logger) async throws -> Int {
        guard try await connection.query("SELECT pg_try_advisory_xact_lock(\(lockKey))", logger: logger)
            .collect().first?.decode(Bool.self) == true else { return 0 }
        // Nothing here takes a transaction id: the next mark's seq is read
        // before this transaction writes (and so takes one).
        let markRows = try await connection.query("""
            SELECT m.seq, \(unescaped: Self.markIsFinal),
                   coalesce(pg_sequence_last_value('siwa.audit_log_seq'), 0)
            FROM (SELECT) AS one LEFT JOIN siwa.audit_seal_mark AS m ON true
            """, logger: logger).collect()
        guard let markRow = markRows.first else { return 0 }
        let (markSeq, markIsFinal, nextSeq) = try markRow.decode((Int64?, Bool?, Int64).self)
        guard let markSeq, markIsFinal == true else {
            if markSeq == nil {
                try await connection.query("""
                    INSERT INTO siwa.audit_seal_mark (seq, xid) VALUES (\(nextSeq), pg_current_xact_id())
                    """, logger: logger)
            }
            return 0
        }
        var prev = AuditChain.genesis
        var headSeq: Int64 = 0
        let head = try await connection.query("SELECT seq, row_hash FROM siwa.audit_chain ORDER BY seq DESC LIMIT 1",
                                              logger: logger).collect()
        if let row = head.first {
            let (seq, hash) = try row.decode((Int64, ByteBuffer).self)
            (headSeq, prev) = (seq, Array(hash.readableBytesView))
        }

        var seqs: [Int64] = []
        var prevs: [ByteBuffer] = []
        var hashes: [ByteBuffer] = []
        let rows = try await connection.query("""
            SELECT \(unescaped: AuditChain.rowColumns) FROM siwa.audit_log AS l
            WHERE l.seq > \(headSeq) AND l.seq <= \(markSeq) ORDER BY l.seq LIMIT \(maxRows)
            """, logger: logger)
        for try await values in rows.decode((Int64, ExactTimestamp, ByteBuffer, ByteBuffer, ByteBuffer?, ByteBuffer, ByteBuffer?, ByteBuffer?).self) {
            let row = AuditRow(values)
            let hash = AuditChain.rowHash(prev: prev, row)
            seqs.append(row.seq)
            prevs.append(ByteBuffer(bytes: prev))
            hashes.append(ByteBuffer(bytes: hash))
            prev = hash
        }
        if !seqs.isEmpty {
            try await connection.query("""
                INSERT INTO siwa.audit_chain (seq, prev_hash, row_hash)
                SELECT * FROM unnest(\(seqs)::bigint[], \(prevs)::bytea[], \(hashes)::bytea[])
                """, logger: logger)
        }
        // Everything up to the mark is sealed: leave the next one (unless
        // no seq was handed out since, when the old one still holds).
        if seqs.count < maxRows, nextSeq > markSeq {
            try await connection.query("""
                UPDATE siwa.audit_seal_mark SET seq = \(nextSeq), xid = pg_current_xact_id()
                """, logger: logger)
        }
        return seqs.count
    }

    /// The last sealed row and when it was sealed (nil: nothing sealed
    /// yet), for a signed head (`siwa audit head --signed`, the worker's log).
    public func sealedHead() async throws -> (head: AuditChainLink, sealedAt: Date)? {
        let rows = try await client.guardedQuery(
            "SELECT seq, row_hash, sealed_at FROM siwa.audit_chain ORDER BY seq DESC LIMIT 1", logger: logger)
        guard let row = rows.first else { return nil }
        let (seq, hash, sealedAt) = try row.decode((Int64, ByteBuffer, Date).self)
        return (AuditChainLink(seq: seq, hash: Array(hash.readableBytesView)), sealedAt)
    }

    /// The last sealed row, and how many rows after it are not sealed yet.
    public func head() async throws -> (head: AuditChainLink?, unsealed: Int64) {
        let rows = try await client.guardedQuery("""
            SELECT h.seq, h.row_hash, (SELECT count(*) FROM siwa.audit_log AS l WHERE l.seq > coalesce(h.seq, 0))
            FROM (SELECT) AS one
            LEFT JOIN LATERAL (SELECT seq, row_hash FROM siwa.audit_chain ORDER BY seq DESC LIMIT 1) AS h ON true
            """, logger: logger)
        guard let row = rows.first else { return (nil, 0) }
        let (seq, hash, unsealed) = try row.decode((Int64?, ByteBuffer?, Int64).self)
        guard let seq, let hash else { return (nil, unsealed) }
        return (AuditChainLink(seq: seq, hash: Array(hash.readableBytesView)), unsealed)
    }
}
