import Foundation

// What `AuditReports` answers, one type per question, Codable with the
// views' snake_case names so `siwa audit --json` and the admin routes
// print the same JSON (`AnswerJSON.pretty`).

/// One row of `siwa.audit_log`.
public struct AuditEntry: Sendable, Equatable, Codable {
    public let seq: Int64
    public let occurredAt: Date
    public let actor: String
    public let action: String
    public let appleSub: String?
    /// The team of `appleSub` (nil on rows written before sql/024).
    public let appleTeam: String?
    public let details: JSONValue

    enum CodingKeys: String, CodingKey {
        case seq, actor, action, details
        case occurredAt = "occurred_at"
        case appleSub = "apple_sub"
        case appleTeam = "apple_team"
    }
}

/// Which audit rows: each filter given narrows; newest first, at most `limit`.
public struct AuditFilter: Sendable, Equatable {
    public var appleSub: String?
    /// With `appleSub`: only its rows in this team (rows written before
    /// sql/024, which name no team, too).
    public var appleTeam: String?
    /// An action (`job.retry`), or a prefix ending in `*` (`job.*`).
    public var action: String?
    /// An actor (`admin`, `api`, `worker`), or a prefix ending in `*` (`admin_key:*`).
    public var actor: String?
    /// From this time on (inclusive).
    public var since: Date?
    /// Before this time (exclusive).
    public var until: Date?
    /// The cursor: only rows older than this `seq` (the last row of the
    /// page before), so that paging is stable while rows are added.
    public var beforeSeq: Int64?
    public var limit: Int

    public init(appleSub: String? = nil, appleTeam: String? = nil, action: String? = nil, actor: String? = nil,
                since: Date? = nil, until: Date? = nil, beforeSeq: Int64? = nil, limit: Int = 100) {
        self.appleSub = appleSub
        self.appleTeam = appleTeam
        self.action = action
        self.actor = actor
        self.since = since
        self.until = until
        self.beforeSeq = beforeSeq
        self.limit = limit
    }
}

/// One row of `siwa.user_history`: `source` is `notification` (what Apple
/// sent), `audit` (an audit row) or `job` (a job as it stands now).
public struct HistoryEntry: Sendable, Equatable, Codable {
    public let at: Date
    public let source: String
    public let action: String
    /// The team of the row's sub (nil on audit rows written before sql/024).
    public let appleTeam: String?
    public let details: JSONValue

    enum CodingKeys: String, CodingKey {
        case at, source, action, details
        case appleTeam = "apple_team"
    }
}

/// One row of `siwa.purge_latency`.
public struct PurgeLatency: Sendable, Equatable, Codable {
    public let appleSub: String?
    public let appleTeam: String?
    public let jobID: Int64
    public let eventType: String?
    public let requestedAt: Date
    public let completedAt: Date?
    public let seconds: Double?
    public let state: String

    enum CodingKeys: String, CodingKey {
        case seconds, state
        case appleSub = "apple_sub"
        case appleTeam = "apple_team"
        case jobID = "job_id"
        case eventType = "event_type"
        case requestedAt = "requested_at"
        case completedAt = "completed_at"
    }
}

/// A user's story: the first `limit` rows of the history (`truncated` when
/// there are more), and each of their purges.
public struct UserReport: Sendable, Equatable, Codable {
    public let appleSub: String
    /// nil: the sub's rows in every team.
    public let appleTeam: String?
    public let history: [HistoryEntry]
    public let truncated: Bool
    public let purges: [PurgeLatency]

    enum CodingKeys: String, CodingKey {
        case history, truncated, purges
        case appleSub = "apple_sub"
        case appleTeam = "apple_team"
    }
}

/// One row of `siwa.daily_summary` (a day without activity has zeros).
public struct DaySummary: Sendable, Equatable, Codable {
    /// The UTC day, `YYYY-MM-DD`.
    public let day: String
    public let notifications: Int
    public let notificationsByType: [String: Int]
    public let rejections: Int
    public let rejectionsByReason: [String: Int]
    public let purgesCompleted: Int
    public let purgeP50Seconds: Double?
    public let purgeP95Seconds: Double?
    public let purgesFailed: Int

    enum CodingKeys: String, CodingKey {
        case day, notifications, rejections
        case notificationsByType = "notifications_by_type"
        case rejectionsByReason = "rejections_by_reason"
        case purgesCompleted = "purges_completed"
        case purgeP50Seconds = "purge_p50_seconds"
        case purgeP95Seconds = "purge_p95_seconds"
        case purgesFailed = "purges_failed"
    }
}

/// One row of `siwa.attention`.
public struct AttentionItem: Sendable, Equatable, Codable {
    public let jobID: Int64
    public let appleSub: String?
    public let appleTeam: String?
    public let state: String
    public let attempt: Int
    public let lastError: String?
    public let since: Date

    enum CodingKeys: String, CodingKey {
        case state, attempt, since
        case jobID = "job_id"
        case appleSub = "apple_sub"
        case appleTeam = "apple_team"
        case lastError = "last_error"
    }
}

/// One row of `siwa.waiting_purges`: a consent revocation's purge waiting
/// out its grace delay (SIWA_CONSENT_REVOKED_PURGE_DELAY_DAYS).
public struct WaitingPurge: Sendable, Equatable, Codable {
    public let jobID: Int64
    public let appleSub: String?
    public let appleTeam: String?
    public let requestedAt: Date
    public let dueAt: Date

    enum CodingKeys: String, CodingKey {
        case jobID = "job_id"
        case appleSub = "apple_sub"
        case appleTeam = "apple_team"
        case requestedAt = "requested_at"
        case dueAt = "due_at"
    }
}

/// The last days, oldest first, with the SLA the attention list uses and
/// the list itself, and the purges waiting out a grace delay.
public struct AuditSummary: Sendable, Equatable, Codable {
    public let purgeSLAHours: Int
    public let days: [DaySummary]
    public let attention: [AttentionItem]
    public let waiting: [WaitingPurge]

    enum CodingKeys: String, CodingKey {
        case days, attention, waiting
        case purgeSLAHours = "purge_sla_hours"
    }
}
