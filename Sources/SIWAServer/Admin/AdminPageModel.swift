import AccountStore
import Foundation

/// What the page's template shows, built from the reports' rows: every
/// value already text, so the template only places and escapes.
struct AdminPageModel {
    struct Notice { let text: String; let isError: Bool }
    struct DayChoice { let days: Int; let href: String; let selected: Bool }
    struct Attention {
        let jobID: Int64, sub: String, team: String, historyHref: String, state: String, attempt: Int, since: String, lastError: String
        let canRetry: Bool, canCancel: Bool, canRunNow: Bool
    }
    struct Waiting { let jobID: Int64, sub: String, team: String, historyHref: String, due: String, requested: String }
    struct HistoryRow { let at, team, source, action, details: String }
    struct History { let sub: String; let rows: [HistoryRow]; let hasRows: Bool }

    let keyName: String
    let csrf: String
    let generatedAt: String
    let days: Int
    let dayChoices: [DayChoice]
    let search: String
    let notice: Notice?
    let chain: ChainStatus.View
    let notifications: Chart
    let latency: Chart
    let refusals: Chart
    let slaHours: Int
    let attention: [Attention]
    let hasAttention: Bool
    let attentionCount: Int
    let waiting: [Waiting]
    let hasWaiting: Bool
    let history: History?

    init(keyName: String, csrf: String, now: Date, days: Int, summary: AuditSummary, history: UserReport?,
         chain: ChainStatus.View, notice: Notice?) {
        self.keyName = keyName
        self.csrf = csrf
        generatedAt = AdminResponse.timestamp(now)
        self.days = days
        let sub = history?.appleSub
        dayChoices = (AdminPage.dayChoices + (AdminPage.dayChoices.contains(days) ? [] : [days])).sorted().map {
            DayChoice(days: $0, href: Self.href(days: $0, sub: sub), selected: $0 == days)
        }
        search = sub ?? ""
        self.notice = notice
        self.chain = chain
        let labels = summary.days.map(\.day)
        notifications = AdminCharts.stackedBars(title: "Notifications per day by type", days: labels,
                                                series: Self.series(summary.days.map(\.notificationsByType)))
        refusals = AdminCharts.stackedBars(title: "Refusals per day by reason", days: labels,
                                           series: Self.series(summary.days.map(\.rejectionsByReason)))
        latency = AdminCharts.latency(title: "Purge latency per day, p50 and p95, hours", days: labels,
                                      p50: summary.days.map { $0.purgeP50Seconds.map { $0 / 3600 } },
                                      p95: summary.days.map { $0.purgeP95Seconds.map { $0 / 3600 } },
                                      slaHours: Double(summary.purgeSLAHours))
        slaHours = summary.purgeSLAHours
        attention = summary.attention.map { item in
            let state = JobState(rawValue: item.state)
            return Attention(jobID: item.jobID, sub: item.appleSub ?? "-", team: item.appleTeam ?? "-",
                             historyHref: Self.historyHref(days: days, sub: item.appleSub),
                             state: item.state, attempt: item.attempt, since: AdminResponse.timestamp(item.since),
                             lastError: item.lastError ?? "",
                             canRetry: [.discarded, .cancelled, .retryable, .available].contains(state),
                             canCancel: [.available, .retryable].contains(state),
                             // Refused (and said so) when the job is due already.
                             canRunNow: [.available, .retryable].contains(state))
        }
        hasAttention = !attention.isEmpty
        attentionCount = attention.count
        waiting = summary.waiting.map { item in
            Waiting(jobID: item.jobID, sub: item.appleSub ?? "-", team: item.appleTeam ?? "-",
                    historyHref: Self.historyHref(days: days, sub: item.appleSub),
                    due: AdminResponse.timestamp(item.dueAt), requested: AdminResponse.timestamp(item.requestedAt))
        }
        hasWaiting = !waiting.isEmpty
        self.history = history.map { report in
            let rows = report.history.map {
                HistoryRow(at: AdminResponse.timestamp($0.at), team: $0.appleTeam ?? "-", source: $0.source, action: $0.action, details: $0.details.compactText)
            }
            return History(sub: report.appleSub, rows: rows, hasRows: !rows.isEmpty)
        }
    }

    /// Per-day maps to one series per key, a value per day.
    static func series(_ days: [[String: Int]]) -> [String: [Int]] {
        var series: [String: [Int]] = [:]
        for key in Set(days.flatMap(\.keys)) { series[key] = days.map { $0[key] ?? 0 } }
        return series
    }

    /// The link to a user's history on the page ("#" without a sub).
    static func historyHref(days: Int, sub: String?) -> String {
        sub.map { href(days: days, sub: $0) + "#history" } ?? "#"
    }

    /// The page's own link, the sub percent-encoded but for RFC 3986's
    /// unreserved characters (so '+', '&' and '#' stay its own).
    static func href(days: Int, sub: String?) -> String {
        "/admin?days=\(days)" + (sub.map { "&sub=" + ($0.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "") } ?? "")
    }

    static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
}
