import Logging
import NIOCore
import PostgresNIO

/// Where the chain breaks, and why (the likeliest cause, as a question).
public struct AuditChainBreak: Sendable, Equatable, CustomStringConvertible {
    public let seq: Int64
    public let reason: String
    public var description: String { "seq \(seq): \(reason)" }
}

/// What `siwa audit verify` found.
public struct AuditChainReport: Sendable {
    /// Sealed rows whose hashes were recomputed and matched, up to the break if any.
    public var sealed: Int64 = 0
    /// The last of them.
    public var head: AuditChainLink?
    /// Rows after the head, written but not sealed when the walk began.
    public var unsealed: Int64 = 0
    public var failure: AuditChainBreak?
}

/// Walks `siwa.audit_log` and `siwa.audit_chain` together in seq order,
/// recomputing every row_hash from the row itself (`AuditChain`), up to the
/// chain's sealed head as it was when the walk began (rows after it are the
/// unsealed tail, counted). Pages of `pageRows` seqs, each a statement of
/// its own, so no statement outlasts the session's statement_timeout
/// however long the log, no snapshot is held for the whole walk, and a
/// paced walk (`rowsPerSecond`, the worker's) leaves the cores to the jobs.
/// Sealed rows never change, so pages read at different moments still make
/// one consistent walk. Needs SELECT on both tables (siwa_auditor,
/// siwa_admin, the owner).
public struct AuditChainVerifier: Sendable {
    let client: PostgresClient
    let logger: Logger
    let pageRows: Int64

    public init(client: PostgresClient, logger: Logger, pageRows: Int = 10_000) {
        self.client = client
        self.logger = logger
        self.pageRows = Int64(max(1, pageRows))
    }

    /// `expectedHead`: a head recorded earlier, which must still be in the
    /// chain with the same hash (a cut tail, or a chain rewritten from an
    /// edit on, is found this way). `rowsPerSecond`: the most seqs a second
    /// the walk reads (nil: as fast as it can).
    public func verify(expectedHead: AuditChainLink? = nil, rowsPerSecond: Int? = nil) async throws -> AuditChainReport {
        let head = try await integer("SELECT coalesce(max(seq), 0) FROM siwa.audit_chain")
        var walk = ChainWalk(expectedHead: expectedHead)
        var after: Int64 = 0
        while after < head {
            let started = ContinuousClock.now
            let upTo = min(head, after + pageRows)
            if let failure = try await walkPage(after: after, upTo: upTo, walk: &walk) { return walk.report(failure) }
            after = upTo
            if let rowsPerSecond, rowsPerSecond > 0, after < head {
                let due = started + .seconds(Double(pageRows) / Double(rowsPerSecond))
                if due > ContinuousClock.now { try await Task.sleep(until: due) }
            }
        }
        walk.unsealedTail(try await integer("SELECT count(*) FROM siwa.audit_log WHERE seq > \(head)"))
        return walk.report(walk.finish())
    }

    private func integer(_ query: PostgresQuery) async throws -> Int64 {
        try await client.guardedQuery(query, logger: logger).first?.decode(Int64.self) ?? 0
    }

    /// The seqs in (after, upTo] of both tables, merged in seq order (at
    /// most twice `pageRows` rows, held at once).
    private func walkPage(after: Int64, upTo: Int64, walk: inout ChainWalk) async throws -> AuditChainBreak? {
        let rows = try await client.guardedQuery("""
            SELECT seq, is_row, occurred_at, actor, action, apple_sub, details, db_user, apple_team, prev_hash, row_hash FROM (
                SELECT l.seq, true AS is_row, l.occurred_at, l.actor, l.action, l.apple_sub, l.details::text AS details,
                       l.db_user, l.apple_team, NULL::bytea AS prev_hash, NULL::bytea AS row_hash
                FROM siwa.audit_log AS l WHERE l.seq > \(after) AND l.seq <= \(upTo)
                UNION ALL
                SELECT c.seq, false, NULL::timestamptz, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
                       NULL::text, c.prev_hash, c.row_hash
                FROM siwa.audit_chain AS c WHERE c.seq > \(after) AND c.seq <= \(upTo)
            ) AS merged
            ORDER BY seq
            """, logger: logger)
        var pending: ChainWalk.Entry?
        for row in rows {
            let (seq, isRow, occurredAt, actor, action, appleSub, details, dbUser, appleTeam, prevHash, rowHash) = try row.decode(
                (Int64, Bool, ExactTimestamp?, ByteBuffer?, ByteBuffer?, ByteBuffer?, ByteBuffer?, ByteBuffer?, ByteBuffer?, ByteBuffer?,
                 ByteBuffer?).self)
            if let entry = pending, entry.seq != seq {
                if let failure = walk.step(entry) { return failure }
                pending = nil
            }
            var entry = pending ?? ChainWalk.Entry(seq: seq)
            if isRow, let occurredAt, let actor, let action, let details {
                entry.row = AuditRow((seq, occurredAt, actor, action, appleSub, details, dbUser, appleTeam))
            } else if let prevHash, let rowHash {
                entry.link = (prevHash, rowHash)
            }
            pending = entry
        }
        if let entry = pending { return walk.step(entry) }
        return nil
    }
}

/// The verifier's state along the chain.
struct ChainWalk {
    /// One seq: its log row, its chain row, or both.
    struct Entry {
        let seq: Int64
        var row: AuditRow?
        var link: (prev: ByteBuffer, hash: ByteBuffer)?
    }

    let expectedHead: AuditChainLink?
    private var prev = AuditChain.genesis
    private var last: AuditChainLink?
    private var sealed: Int64 = 0
    private var unsealed: Int64 = 0
    private var firstUnsealed: Int64?
    private var headSeen = false

    init(expectedHead: AuditChainLink?) { self.expectedHead = expectedHead }

    /// nil: the chain holds so far.
    mutating func step(_ entry: Entry) -> AuditChainBreak? {
        let seq = entry.seq
        guard let link = entry.link else {
            // Written, not sealed: fine at the tail, a break below a sealed row.
            unsealed += 1
            if firstUnsealed == nil { firstUnsealed = seq }
            return nil
        }
        if let firstUnsealed {
            return AuditChainBreak(seq: firstUnsealed, reason: "not in the chain, though seq \(seq) after it is sealed (a row added below sealed ones?)")
        }
        if let head = expectedHead, !headSeen, head.seq < seq {
            return AuditChainBreak(seq: head.seq, reason: "the recorded head is not in the chain (its row removed?)")
        }
        guard let row = entry.row else {
            return AuditChainBreak(seq: seq, reason: "sealed, but missing from siwa.audit_log (deleted?)")
        }
        guard link.prev.readableBytesView.elementsEqual(prev) else {
            return AuditChainBreak(seq: seq, reason: last.map {
                "its prev_hash is not the row_hash of seq \($0.seq), the sealed row before it (a sealed row removed, or rows reordered?)"
            } ?? "its prev_hash is not the start of the chain (the rows before it removed?)")
        }
        let hash = AuditChain.rowHash(prev: prev, row)
        guard link.hash.readableBytesView.elementsEqual(hash) else {
            return AuditChainBreak(seq: seq, reason: "its contents do not match its row_hash (edited, or swapped with another row?)")
        }
        if let head = expectedHead, head.seq == seq {
            guard head.hash == hash else {
                return AuditChainBreak(seq: seq, reason: "its row_hash is not the recorded head's \(head.hashHex) (the chain rewritten at or before this row?)")
            }
            headSeen = true
        }
        prev = hash
        last = AuditChainLink(seq: seq, hash: hash)
        sealed += 1
        return nil
    }

    /// The rows after the sealed head the walk stopped at.
    mutating func unsealedTail(_ count: Int64) { unsealed += count }

    /// After the last row: the recorded head must have been passed.
    func finish() -> AuditChainBreak? {
        guard let head = expectedHead, !headSeen else { return nil }
        return AuditChainBreak(seq: head.seq, reason: "the recorded head is not in the chain, which ends at "
                               + (last.map { "seq \($0.seq) (rows removed from its tail?)" } ?? "its start (every sealed row removed?)"))
    }

    func report(_ failure: AuditChainBreak?) -> AuditChainReport {
        AuditChainReport(sealed: sealed, head: last, unsealed: unsealed, failure: failure)
    }
}
