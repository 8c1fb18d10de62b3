import AccountStore

/// `GET /admin/jobs`: `{"jobs": [...]}`, each as `siwa jobs --json` shows it.
struct JobsAnswer: Encodable {
    let jobs: [JobSummary]
}

/// A job changed by `POST /admin/jobs/{id}/...`: `{"job": {...}}`.
struct JobAnswer: Encodable {
    let job: JobSummary
}

/// `GET /admin/audit/verify`: `{"ok", "rows", "unsealed", "head": {"seq",
/// "hash"} or null}`, and where the chain breaks (`broken_at`, `reason`),
/// absent when it holds.
struct ChainVerificationAnswer: Encodable {
    struct Head: Encodable {
        let seq: Int64
        let hash: String
    }

    let ok: Bool
    let rows: Int64
    let unsealed: Int64
    let head: Head?
    let brokenAt: Int64?
    let reason: String?

    init(_ report: AuditChainReport) {
        ok = report.failure == nil
        rows = report.sealed
        unsealed = report.unsealed
        head = report.head.map { Head(seq: $0.seq, hash: $0.hashHex) }
        brokenAt = report.failure?.seq
        reason = report.failure?.reason
    }

    enum CodingKeys: String, CodingKey { case ok, rows, unsealed, head, brokenAt, reason }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(ok, forKey: .ok)
        try container.encode(rows, forKey: .rows)
        try container.encode(unsealed, forKey: .unsealed)
        try container.encode(head, forKey: .head)
        try container.encodeIfPresent(brokenAt, forKey: .brokenAt)
        try container.encodeIfPresent(reason, forKey: .reason)
    }
}
