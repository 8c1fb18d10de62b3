import AccountStore
import Foundation

/// `siwa audit`'s tables: times in UTC (ISO 8601), details as one line of JSON.
enum AuditOutput {
    static func table(_ entries: [AuditEntry]) -> String {
        TextTable.render([["SEQ", "AT", "ACTOR", "ACTION", "APPLE SUB", "DETAILS"]] + entries.map { entry in
            [String(entry.seq), time(entry.occurredAt), entry.actor, entry.action, entry.appleSub ?? "-", shortened(entry.details.compactText)]
        })
    }

    static func table(_ report: UserReport) -> String {
        var lines = ["history of \(report.appleSub) (\(report.history.count) rows\(report.truncated ? ", more after these: raise --limit" : "")):"]
        lines.append(TextTable.render([["AT", "SOURCE", "ACTION", "DETAILS"]] + report.history.map { entry in
            [time(entry.at), entry.source, entry.action, shortened(entry.details.compactText)]
        }))
        lines.append("")
        if report.purges.isEmpty {
            lines.append("purges: none")
        } else {
            lines.append("purges:")
            lines.append(TextTable.render([["JOB", "EVENT", "REQUESTED", "COMPLETED", "SECONDS", "STATE"]] + report.purges.map { purge in
                [String(purge.jobID), purge.eventType ?? "-", time(purge.requestedAt), purge.completedAt.map(time) ?? "-",
                 purge.seconds.map(seconds) ?? "-", purge.state]
            }))
        }
        return lines.joined(separator: "\n")
    }

    static func table(_ summary: AuditSummary) -> String {
        var lines = [TextTable.render([["DAY (UTC)", "NOTIFICATIONS", "REFUSED", "PURGED", "P50 S", "P95 S", "FAILED"]]
            + summary.days.map { day in
                [day.day, counted(day.notifications, day.notificationsByType), counted(day.rejections, day.rejectionsByReason),
                 String(day.purgesCompleted), day.purgeP50Seconds.map(seconds) ?? "-", day.purgeP95Seconds.map(seconds) ?? "-",
                 String(day.purgesFailed)]
            })]
        lines.append("")
        lines.append("purge SLA: \(summary.purgeSLAHours) h (SIWA_PURGE_SLA_HOURS, recorded by siwa migrate)")
        if summary.attention.isEmpty {
            lines.append("needs attention: nothing (no discarded job, no purge pending past the SLA)")
        } else {
            lines.append("needs attention (\(summary.attention.count)): discarded jobs and purges pending past the SLA")
            lines.append(TextTable.render([["JOB", "STATE", "ATTEMPT", "SINCE", "APPLE SUB", "LAST ERROR"]] + summary.attention.map { item in
                [String(item.jobID), item.state, String(item.attempt), time(item.since), item.appleSub ?? "-",
                 item.lastError.map(shortened) ?? "-"]
            }))
        }
        if !summary.waiting.isEmpty {
            lines.append("waiting (\(summary.waiting.count)): consent revocations' purges in their grace delay (a sign-in cancels one; `siwa jobs run-now JOB` runs it now)")
            lines.append(TextTable.render([["JOB", "DUE", "REQUESTED", "APPLE SUB"]] + summary.waiting.map { item in
                [String(item.jobID), time(item.dueAt), time(item.requestedAt), item.appleSub ?? "-"]
            }))
        }
        return lines.joined(separator: "\n")
    }

    /// RFC 4180: a header line, then one line per row, CRLF-terminated,
    /// every field quoted. A field that would start with =, +, -, @, a tab
    /// or a carriage return gets a leading ' so that a spreadsheet opening
    /// the file reads it as text, never as a formula (an admin key's name,
    /// an actor, a sub are chosen by others).
    static func csv(_ entries: [AuditEntry]) -> String {
        let header = ["seq", "occurred_at", "actor", "action", "apple_sub", "apple_team", "details"]
        let rows = entries.map { entry in
            [String(entry.seq), time(entry.occurredAt), entry.actor, entry.action, entry.appleSub ?? "", entry.appleTeam ?? "",
             entry.details.compactText]
        }
        return ([header] + rows).map { $0.map(csvField).joined(separator: ",") + "\r\n" }.joined()
    }

    static func csvField(_ text: String) -> String {
        let formula = text.first.map { "=+-@\t\r".contains($0) } ?? false
        return "\"" + (formula ? "'" : "") + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    static func time(_ date: Date) -> String { UTCTime.text(date) }

    static func seconds(_ value: Double) -> String { String(format: "%.1f", value) }

    /// `12 (account-delete 2, email-disabled 10)`.
    static func counted(_ total: Int, _ parts: [String: Int]) -> String {
        parts.isEmpty ? String(total) : "\(total) (" + parts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")"
    }

    static func shortened(_ text: String) -> String {
        text.count > 120 ? String(text.prefix(117)) + "..." : text
    }
}

/// Columns padded to their widest cell, two spaces apart; the last column
/// is not padded.
enum TextTable {
    static func render(_ rows: [[String]]) -> String {
        let widths = (rows.first ?? []).indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
