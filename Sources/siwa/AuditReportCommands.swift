import AccountStore
import ArgumentParser
import Foundation

extension Audit {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The audit trail, newest first (the default subcommand).",
            discussion: """
                Each row: its seq, when (UTC), the actor (apple, api, worker, queue, admin, migrate), \
                the action (notification.recorded, user.signed_in, job.enqueued, job.claimed, \
                job.step_completed, job.retry_scheduled, job.completed, job.discarded, token.revoked, \
                job.retry, job.cancel, ...), the Apple sub, and its details as JSON.
                Rows are paged newest first: a full page ends with `next page: --before SEQ` on \
                stderr; the same command with that option gives the rows older than it.
                Examples:
                  siwa audit --sub 001234.abc.0001
                  siwa audit --action 'job.*' --since 24h
                  siwa audit --actor admin --since 2026-05-01 --until 2026-06-01 --csv > may.csv
                  siwa audit --since 2026-05-01T00:00:00Z --limit 1000 --json
                  siwa audit --limit 1000 --before 51234
                """ + "\n\n" + Audit.usage
        )

        @OptionGroup var user: UserFilterOptions

        @Option(help: "Only this action, or the actions starting with a prefix ending in * (e.g. 'job.*').")
        var action: String?

        @Option(help: "Only rows by this actor (apple, api, worker, queue, admin, migrate, admin_key:NAME), or a prefix ending in * (e.g. 'admin_key:*').")
        var actor: String?

        @Option(help: ArgumentHelp("Only rows from this time on: \(AuditTime.accepted).", valueName: "time"))
        var since: String?

        @Option(help: ArgumentHelp("Only rows before this time (the same forms as --since).", valueName: "time"))
        var until: String?

        @Option(parsing: .unconditional, help: ArgumentHelp(
            "Only rows older than this seq: the cursor for the next page, which the page before printed on stderr (`next page: --before SEQ`).",
            valueName: "seq"))
        var before: WholeNumber?

        @Option(parsing: .unconditional, help: "At most this many rows (1 to \(AuditReports.maximumLimit)).")
        var limit = WholeNumber(argument: "100")

        @Flag(help: "One JSON array instead of a table.")
        var json = false

        @Flag(help: "CSV (RFC 4180, a header line, details as JSON) instead of a table.")
        var csv = false

        func validate() throws {
            _ = try filter()
        }

        func filter() throws -> AuditFilter {
            if json && csv { throw Audit.badArgument("--json and --csv: choose one") }
            func time(_ name: String, _ text: String?) throws -> Date? {
                guard let text else { return nil }
                guard let time = AuditTime.parse(text) else { throw Audit.badArgument("\(name): expected \(AuditTime.accepted), got '\(text)'") }
                return time
            }
            let (since, until) = (try time("--since", since), try time("--until", until))
            if let since, let until, since >= until { throw Audit.badArgument("--until must be later than --since") }
            if action?.isEmpty == true || actor?.isEmpty == true { throw Audit.badArgument("--action and --actor must not be empty") }
            if let actor, actor.utf8.count > 128 { throw Audit.badArgument("--actor: at most 128 characters") }
            return AuditFilter(appleSub: user.sub, appleTeam: user.team, action: action, actor: actor, since: since, until: until,
                               beforeSeq: try before.map { Int64(try $0.checked("--before", in: 1...Int.max)) },
                               limit: try limit.checked("--limit", in: 1...AuditReports.maximumLimit))
        }

        func run() async throws {
            let filter = try filter()
            let entries = await Audit.run { try await $0.auditLog(filter) }
            if csv {
                print(AuditOutput.csv(entries), terminator: "")
            } else {
                try Audit.emit(entries, json: json) {
                    entries.isEmpty ? "no audit rows" : AuditOutput.table(entries)
                }
            }
            // A full page: there may be more. On stderr, so that the rows
            // (a table, JSON, CSV) on stdout stay only rows.
            if entries.count == filter.limit, let last = entries.last {
                Startup.report("next page: --before \(last.seq)", priority: 6)
            }
        }
    }

    struct User: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "One Apple user's whole story, in order, and their purges.",
            discussion: """
                Merges what Apple sent (notifications, without their claims), every audit row about \
                the user (sign-ins, status changes, purge steps, token revocations, admin actions) \
                and their jobs as they stand now, oldest first; then each purge: when it was \
                requested and completed, and how long it took. Exit status 1 if siwa knows nothing \
                of the user.
                """ + "\n\n" + Audit.usage
        )

        @OptionGroup var user: UserArguments

        @Option(parsing: .unconditional, help: "At most this many history rows, the oldest (1 to \(AuditReports.maximumLimit)).")
        var limit = WholeNumber(argument: "1000")

        @Flag(help: "One JSON object instead of tables.")
        var json = false

        func validate() throws {
            _ = try limit.checked("--limit", in: 1...AuditReports.maximumLimit)
        }

        func run() async throws {
            let (user, sub, limit) = (user, user.sub, try limit.checked("--limit", in: 1...AuditReports.maximumLimit))
            let report = await Audit.run(for: user) { reports, team in try await reports.user(appleSub: sub, team: team, limit: limit) }
            if report.history.isEmpty { Startup.fail("no history for Apple sub \(sub)", code: 1) }
            try Audit.emit(report, json: json) { AuditOutput.table(report) }
        }
    }

    struct Summary: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Per UTC day: notifications, refusals, purges and their latency; what needs attention.",
            discussion: """
                One row per day, oldest first, today last: notifications recorded by type, refused \
                deliveries by reason, purges completed with their latency's median and 95th \
                percentile (from the event's recording to the purge's last step), purges discarded. \
                Then the purge SLA (SIWA_PURGE_SLA_HOURS as `siwa migrate` recorded it) and what \
                needs attention: every discarded job, and every purge pending for longer than the SLA.
                """ + "\n\n" + Audit.usage
        )

        @Option(parsing: .unconditional, help: "How many days, today included (1 to \(AuditReports.maximumDays)).")
        var days = WholeNumber(argument: "7")

        @Flag(help: "One JSON object instead of tables.")
        var json = false

        func validate() throws {
            _ = try days.checked("--days", in: 1...AuditReports.maximumDays)
        }

        func run() async throws {
            let days = try days.checked("--days", in: 1...AuditReports.maximumDays)
            let summary = await Audit.run { try await $0.summary(days: days) }
            try Audit.emit(summary, json: json) { AuditOutput.table(summary) }
        }
    }
}
