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
                Examples:
                  siwa audit --sub 001234.abc.0001
                  siwa audit --action 'job.*' --since 24h
                  siwa audit --since 2026-05-01T00:00:00Z --limit 1000 --json
                """ + "\n\n" + Audit.usage
        )

        @Option(help: "Only rows about this Apple user (`sub`).")
        var sub: String?

        @Option(help: "Only this action, or the actions starting with a prefix ending in * (e.g. 'job.*').")
        var action: String?

        @Option(help: ArgumentHelp("Only rows from this time on: \(AuditTime.accepted).", valueName: "time"))
        var since: String?

        @Option(parsing: .unconditional, help: "At most this many rows (1 to \(AuditReports.maximumLimit)).")
        var limit = WholeNumber(argument: "100")

        @Flag(help: "One JSON array instead of a table.")
        var json = false

        func validate() throws {
            _ = try filter()
        }

        func filter() throws -> AuditFilter {
            var since: Date?
            if let text = self.since {
                guard let time = AuditTime.parse(text) else { throw Audit.badArgument("--since: expected \(AuditTime.accepted), got '\(text)'") }
                since = time
            }
            if action?.isEmpty == true || sub?.isEmpty == true { throw Audit.badArgument("--sub and --action must not be empty") }
            return AuditFilter(appleSub: sub, action: action, since: since,
                               limit: try limit.checked("--limit", in: 1...AuditReports.maximumLimit))
        }

        func run() async throws {
            let filter = try filter()
            let entries = await Audit.run { try await $0.auditLog(filter) }
            try Audit.emit(entries, json: json) {
                entries.isEmpty ? "no audit rows" : AuditOutput.table(entries)
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

        @Argument(help: "The Apple user's `sub`.")
        var sub: String

        @Option(parsing: .unconditional, help: "At most this many history rows, the oldest (1 to \(AuditReports.maximumLimit)).")
        var limit = WholeNumber(argument: "1000")

        @Flag(help: "One JSON object instead of tables.")
        var json = false

        func validate() throws {
            _ = try limit.checked("--limit", in: 1...AuditReports.maximumLimit)
            if sub.isEmpty { throw Audit.badArgument("SUB must not be empty") }
        }

        func run() async throws {
            let (sub, limit) = (sub, try limit.checked("--limit", in: 1...AuditReports.maximumLimit))
            let report = await Audit.run { try await $0.user(appleSub: sub, limit: limit) }
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
