import Foundation
import Logging
import PostgresNIO

/// The answers admins ask for, read from the views of
/// sql/010_audit_views.sql: the audit trail filtered, a user's history and
/// purges, the daily summary and what needs attention. `siwa audit` and the
/// admin routes share it; any role that can read the views can use it
/// (siwa_auditor, siwa_admin, the runtime role).
public struct AuditReports: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The longest `limit` accepted (audit rows, history rows).
    public static let maximumLimit = 100_000
    /// The most days `summary` covers.
    public static let maximumDays = 3660

    /// Audit rows, newest first. Each filter is its own condition, so the
    /// planner sees only those given (a sub goes through its index).
    public func auditLog(_ filter: AuditFilter) async throws -> [AuditEntry] {
        var binds = PostgresBindings(capacity: 8)
        var conditions: [String] = []
        if let sub = filter.appleSub {
            binds.append(sub)
            conditions.append("apple_sub = $\(binds.count)")
            if let team = filter.appleTeam {
                binds.append(team)
                conditions.append("coalesce(apple_team, $\(binds.count)) = $\(binds.count)")
            }
        }
        for (column, value) in [("action", filter.action), ("actor", filter.actor)] {
            guard let value else { continue }
            if value.hasSuffix("*") {
                binds.append(Self.likePrefix(String(value.dropLast())))
                conditions.append("\(column) LIKE $\(binds.count)")
            } else {
                binds.append(value)
                conditions.append("\(column) = $\(binds.count)")
            }
        }
        if let since = filter.since {
            binds.append(since)
            conditions.append("occurred_at >= $\(binds.count)")
        }
        if let until = filter.until {
            binds.append(until)
            conditions.append("occurred_at < $\(binds.count)")
        }
        if let before = filter.beforeSeq {
            binds.append(before)
            conditions.append("seq < $\(binds.count)")
        }
        binds.append(Int64(filter.limit))
        let sql = """
            SELECT seq, occurred_at, actor, action, apple_sub, apple_team, details::text FROM siwa.audit_log
            \(conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND "))
            ORDER BY seq DESC LIMIT $\(binds.count)
            """
        return try await client.guardedQuery(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger).map { row in
            let (seq, at, actor, action, sub, team, details) = try row.decode((Int64, Date, String, String, String?, String?, String).self)
            return AuditEntry(seq: seq, occurredAt: at, actor: actor, action: action, appleSub: sub, appleTeam: team,
                              details: try JSONValue(parsing: details))
        }
    }

    /// The user's history in order (its first `limit` rows) and purges;
    /// with no team, the sub's in every team (each row names its team; an
    /// audit row written before sql/024 names none, and is shown either way).
    public func user(appleSub: String, team: String? = nil, limit: Int) async throws -> UserReport {
        let rows = try await client.guardedQuery("""
            SELECT at, source, action, apple_team, details::text FROM siwa.user_history
            WHERE apple_sub = \(appleSub) AND (\(team)::text IS NULL OR coalesce(apple_team, \(team)::text) = \(team)::text)
            LIMIT \(Int64(limit) + 1)
            """, logger: logger)
        let history = try rows.prefix(limit).map { row in
            let (at, source, action, rowTeam, details) = try row.decode((Date, String, String, String?, String).self)
            return HistoryEntry(at: at, source: source, action: action, appleTeam: rowTeam, details: try JSONValue(parsing: details))
        }
        let purges = try await client.guardedQuery("""
            SELECT apple_sub, apple_team, job_id, event_type, requested_at, completed_at, seconds, state
            FROM siwa.purge_latency
            WHERE apple_sub = \(appleSub) AND (\(team)::text IS NULL OR coalesce(apple_team, \(team)::text) = \(team)::text)
            ORDER BY requested_at, job_id
            """, logger: logger).map { row in
            let (sub, rowTeam, job, event, requested, completed, seconds, state) =
                try row.decode((String?, String?, Int64, String?, Date, Date?, Double?, String).self)
            return PurgeLatency(appleSub: sub, appleTeam: rowTeam, jobID: job, eventType: event, requestedAt: requested, completedAt: completed,
                                seconds: seconds, state: state)
        }
        return UserReport(appleSub: appleSub, appleTeam: team, history: history, truncated: rows.count > limit, purges: purges)
    }

    /// The last `days` UTC days (today included), oldest first, days
    /// without activity as zeros; the purge SLA; what needs attention
    /// (oldest first, at most 1,000); the purges waiting out a grace delay
    /// (soonest due first, at most 1,000).
    public func summary(days: Int) async throws -> AuditSummary {
        // The view is filtered on its own, so the filter reaches its parts.
        let dayRows = try await client.guardedQuery("""
            SELECT to_char(d.day, 'YYYY-MM-DD'), coalesce(s.notifications, 0), coalesce(s.notifications_by_type, '{}')::text,
                   coalesce(s.rejections, 0), coalesce(s.rejections_by_reason, '{}')::text, coalesce(s.purges_completed, 0),
                   s.purge_p50_seconds, s.purge_p95_seconds, coalesce(s.purges_failed, 0)
            FROM (SELECT (now() AT TIME ZONE 'UTC')::date - back AS day FROM generate_series(0, \(Int32(days - 1))) AS back) AS d
            LEFT JOIN (SELECT * FROM siwa.daily_summary
                       WHERE day > (now() AT TIME ZONE 'UTC')::date - \(Int32(days))) AS s ON s.day = d.day
            ORDER BY d.day
            """, logger: logger)
        let summaries = try dayRows.map { row in
            let (day, notifications, byType, rejections, byReason, completed, p50, p95, failed) =
                try row.decode((String, Int64, String, Int64, String, Int64, Double?, Double?, Int64).self)
            return DaySummary(day: day, notifications: Int(notifications), notificationsByType: try Self.counts(byType),
                              rejections: Int(rejections), rejectionsByReason: try Self.counts(byReason),
                              purgesCompleted: Int(completed), purgeP50Seconds: p50, purgeP95Seconds: p95, purgesFailed: Int(failed))
        }
        let attention = try await client.guardedQuery("""
            SELECT job_id, apple_sub, apple_team, state, attempt, last_error, since FROM siwa.attention
            ORDER BY since, job_id LIMIT 1000
            """, logger: logger).map { row in
            let (job, sub, team, state, attempt, error, since) = try row.decode((Int64, String?, String?, String, Int32, String?, Date).self)
            return AttentionItem(jobID: job, appleSub: sub, appleTeam: team, state: state, attempt: Int(attempt), lastError: error, since: since)
        }
        let waiting = try await client.guardedQuery("""
            SELECT job_id, apple_sub, apple_team, requested_at, due_at FROM siwa.waiting_purges ORDER BY due_at, job_id LIMIT 1000
            """, logger: logger).map { row in
            let (job, sub, team, requested, due) = try row.decode((Int64, String?, String?, Date, Date).self)
            return WaitingPurge(jobID: job, appleSub: sub, appleTeam: team, requestedAt: requested, dueAt: due)
        }
        return AuditSummary(purgeSLAHours: try await purgeSLAHours(), days: summaries, attention: attention, waiting: waiting)
    }

    /// The SLA `siwa.attention` applies (SIWA_PURGE_SLA_HOURS as `siwa migrate` last recorded it).
    public func purgeSLAHours() async throws -> Int {
        let rows = try await client.guardedQuery("SELECT purge_sla_hours FROM siwa.report_settings", logger: logger)
        return Int(try rows.first?.decode(Int32.self) ?? 0)
    }

    /// Records the SLA for the views (by `siwa migrate`, as the owner).
    public static func recordPurgeSLA(hours: Int, client: PostgresClient, logger: Logger) async throws {
        try await client.guardedQuery("""
            UPDATE siwa.report_settings SET purge_sla_hours = \(Int32(hours)), updated_at = now()
            WHERE purge_sla_hours IS DISTINCT FROM \(Int32(hours))
            """, logger: logger)
    }

    private static func counts(_ text: String) throws -> [String: Int] {
        try JSONDecoder().decode([String: Int].self, from: Data(text.utf8))
    }

    /// `text` as a LIKE pattern matching itself, then anything.
    static func likePrefix(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
            .replacingOccurrences(of: "_", with: "\\_") + "%"
    }
}
