import AccountStore
import AppleSimulator
import Foundation
import PostgresNIO
import Testing

/// The views of sql/010_audit_views.sql and `siwa audit`, on a history made
/// by siwa's real parts: sign-in over HTTP, Apple's notifications from the
/// simulator, a real `siwa worker` process whose downstream fails once.
@Suite("Audit views", .testDatabases, .timeLimit(.minutes(10)))
struct AuditViewsTests {
    static func reports<T: Sendable>(_ database: TestDatabase, _ body: (AuditReports) async throws -> T) async throws -> T {
        try await database.withClient { client in try await body(AuditReports(client: client, logger: TestEnvironment.logger)) }
    }

    /// `source action` of each history row.
    static func steps(_ report: UserReport) -> [String] {
        report.history.map { "\($0.source) \($0.action)" }
    }

    /// Whether `expected` appears in `steps` in this order (other rows between allowed).
    static func inOrder(_ expected: [String], in steps: [String]) -> Bool {
        var rest = steps[...]
        for step in expected {
            guard let index = rest.firstIndex(of: step) else { return false }
            rest = rest[(index + 1)...]
        }
        return true
    }

    @Test func aScriptedHistoryIsToldInOrderAndItsPurgeIsTimed() async throws {
        let setup = try await AccountDeletionTests.Setup.start(server: ["SIWA_ON_CONSENT_REVOKED": "sign_out"])
        try atTestEnd { await setup.stop() }
        let database = setup.database
        let server = setup.signIn.server
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        let sub = "001.audit.0001"

        _ = try await setup.signedIn(sub)
        let hidden = "hidden.person@privaterelay.appleid.com"
        #expect(try await server.post(token: server.notification("email-disabled", sub: sub, email: hidden)).status == 200)
        // The consent policy `sign_out`: a job revokes the tokens and keeps the data.
        #expect(try await server.post(token: server.notification("consent-revoked", sub: sub)).status == 200)
        #expect(try await setup.worker.wait {
            try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE args->>'scope' = 'tokens' AND state = 'completed'") == 1
        }, "\(worker.log.suffix(2000))")
        // Then the deletion: its webhook fails once, and the retry completes it.
        setup.worker.downstream.set(.failFirst(1))
        #expect(try await server.post(token: server.notification("account-delete", sub: sub)).status == 200)
        #expect(try await setup.worker.wait {
            try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE NOT args ? 'scope' AND state = 'completed'") == 1
        }, "\(worker.log.suffix(2000))")
        #expect(try await server.post(body: Data(#"{"payload": "junk"}"#.utf8)).status == 400)
        #expect(try await eventually { try await database.scalar("SELECT count(*) FROM siwa.rejected_notifications") == 1 })

        let report = try await Self.reports(database) { try await $0.user(appleSub: sub, limit: 1000) }
        let steps = Self.steps(report)
        // (A notification's `notification.recorded` and its job's `job.enqueued`
        // are rows of one statement: either may come first.)
        #expect(Self.inOrder([
            "audit user.signed_in",
            "notification email-disabled", "audit notification.recorded",
            "notification consent-revoked", "audit job.enqueued", "audit job.claimed", "audit token.revoked", "audit job.completed",
            "notification account-delete", "audit job.enqueued", "audit job.claimed", "audit job.step_completed",
            "audit job.retry_scheduled", "audit job.claimed", "audit job.step_completed", "audit job.completed", "job job.completed",
        ], in: steps), "\(steps)")
        #expect(steps.filter { $0 == "audit notification.recorded" }.count == 3, "\(steps)")
        #expect(zip(report.history, report.history.dropFirst()).allSatisfy { $0.at <= $1.at }, "in time order")
        #expect(!report.truncated)
        let text = report.history.map(\.details.compactText).joined(separator: "\n")
        #expect(!text.contains("@") && !text.contains("Ada"), "no email address, no name: \(text)")

        // One purge (the sign-out is not one), timed from its job's own row.
        let deletionJob = try await database.scalar("SELECT id FROM siwa.jobs WHERE NOT args ? 'scope'")
        let jobRow = try await database.withClient { client in
            try await client.query("SELECT created_at, finalized_at FROM siwa.jobs WHERE id = \(deletionJob)",
                                   logger: TestEnvironment.logger).collect().first
        }
        let (created, finalized) = try #require(jobRow, "no purge job").decode((Date, Date).self)
        let purge = try #require(report.purges.first)
        #expect(report.purges.count == 1)
        #expect(purge.jobID == Int64(deletionJob) && purge.eventType == "account-delete" && purge.state == "completed")
        #expect(purge.requestedAt == created && purge.completedAt == finalized)
        #expect(abs((purge.seconds ?? -1) - finalized.timeIntervalSince(created)) < 0.001)

        // The summary agrees with the audit rows' own timestamps, day by day.
        let summary = try await Self.reports(database) { try await $0.summary(days: 2) }
        let expected = try await database.strings("""
            SELECT to_char((occurred_at AT TIME ZONE 'UTC')::date, 'YYYY-MM-DD') || ' ' || (details->>'event_type')
            FROM siwa.audit_log WHERE action = 'notification.recorded'
            """)
        for day in summary.days {
            let types = expected.filter { $0.hasPrefix(day.day) }.map { String($0.dropFirst(11)) }
            #expect(day.notifications == types.count, "\(day)")
            #expect(day.notificationsByType == Dictionary(types.map { ($0, 1) }, uniquingKeysWith: +), "\(day)")
        }
        let completedDay = String(UTCTime.text(finalized).prefix(10))
        let purgeDay = try #require(summary.days.first { $0.day == completedDay })
        #expect(purgeDay.purgesCompleted == 1 && purgeDay.purgesFailed == 0)
        #expect(purgeDay.purgeP50Seconds == purge.seconds && purgeDay.purgeP95Seconds == purge.seconds)
        #expect(summary.days.map(\.rejections).reduce(0, +) == 1)
        #expect(summary.days.flatMap(\.rejectionsByReason.keys).count == 1)
        #expect(summary.days.count == 2 && summary.days.last?.day == String(UTCTime.text(Date()).prefix(10)))

        // `siwa audit`, as a table and as JSON, as the runtime role (granted the views).
        let env = ["SIWA_DATABASE_URL": database.url]
        let table = try await runSIWA(["audit", "user", sub], environment: env)
        #expect(table.status == 0, "\(table.output)")
        #expect(table.output.contains("history of \(sub) (\(report.history.count) rows)"), "\(table.output)")
        #expect(table.output.contains("notification  email-disabled") && table.output.contains("purges:"), "\(table.output)")
        #expect(table.output.contains(" account-delete ") && !table.output.contains("@"), "\(table.output)")
        let json = try await runSIWA(["audit", "user", sub, "--json"], environment: env)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any], "\(json.output)")
        #expect((object["history"] as? [Any])?.count == report.history.count)
        #expect(((object["purges"] as? [[String: Any]])?.first?["job_id"] as? Int) == deletionJob)

        let list = try await runSIWA(["audit", "--sub", sub, "--action", "job.*", "--since", "1h", "--json"], environment: env)
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(list.output.utf8)) as? [[String: Any]], "\(list.output)")
        let jobActions = steps.filter { $0.hasPrefix("audit job.") }
        #expect(rows.count == jobActions.count && rows.allSatisfy { ($0["action"] as? String)?.hasPrefix("job.") == true })
        #expect(rows.map { $0["seq"] as? Int ?? 0 } == rows.map { $0["seq"] as? Int ?? 0 }.sorted(by: >), "newest first")
        let listTable = try await runSIWA(["audit", "--sub", sub, "--limit", "3"], environment: env)
        // A full page: the cursor for the next on stderr (the output here is both).
        let tableLines = listTable.output.split(separator: "\n").filter { !$0.hasPrefix("siwa: next page: --before ") }
        #expect(tableLines.count == 4 && tableLines.first?.hasPrefix("SEQ  ") == true, "\(listTable.output)")
        #expect(listTable.output.contains("siwa: next page: --before "), "\(listTable.output)")

        let summaryTable = try await runSIWA(["audit", "summary", "--days", "2"], environment: env)
        #expect(summaryTable.status == 0 && summaryTable.output.contains("purge SLA: 72 h"), "\(summaryTable.output)")
        #expect(summaryTable.output.contains("account-delete 1"), "\(summaryTable.output)")
        let summaryJSON = try await runSIWA(["audit", "summary", "--days", "2", "--json"], environment: env)
        let decoded = try JSONDecoder().decode(AuditSummaryDays.self, from: Data(summaryJSON.output.utf8))
        #expect(decoded.days.map(\.day) == summary.days.map(\.day) && decoded.purge_sla_hours == 72)
        #expect(decoded.days.map(\.purges_completed) == summary.days.map(\.purgesCompleted))
    }

    /// What `siwa audit summary --json` prints, read back by name.
    struct AuditSummaryDays: Decodable {
        struct Day: Decodable {
            let day: String
            let purges_completed: Int
        }
        let purge_sla_hours: Int
        let days: [Day]
    }

    /// A sign-out still waiting when the user deletes their account becomes
    /// the purge: its latency counts from the deletion, not the sign-out.
    @Test func aSignOutWidenedByADeletionIsTimedFromTheDeletion() async throws {
        let setup = try await SignInTests.Setup.start(settings: ["SIWA_ON_CONSENT_REVOKED": "sign_out"])
        try atTestEnd { await setup.server.stop() }
        let database = setup.server.database
        let sub = "001.audit.widen"
        try #require(try await setup.signIn(try setup.appleSignIn(sub: sub)).status == 200)
        try #require(try await setup.server.post(token: setup.server.notification("consent-revoked", sub: sub)).status == 200)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.purge_latency WHERE apple_sub = '\(sub)'") == 0)
        try #require(try await setup.server.post(token: setup.server.notification("account-delete", sub: sub)).status == 200)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE NOT args ? 'scope'") == 1, "one job, now a purge")
        let row = try await database.withClient { client in
            try await client.query("""
                SELECT (SELECT count(*) FROM siwa.purge_latency WHERE apple_sub = \(sub) AND event_type = 'account-delete'
                          AND state = 'available' AND requested_at = w.occurred_at),
                       w.occurred_at, j.created_at
                FROM siwa.audit_log AS w JOIN siwa.jobs AS j ON j.id = (w.details->>'job_id')::bigint
                WHERE w.action = 'job.scope_widened' AND w.apple_sub = \(sub)
                """, logger: TestEnvironment.logger).collect().first
        }
        let (purges, widened, created) = try #require(row, "no job.scope_widened row").decode((Int, Date, Date).self)
        #expect(purges == 1 && widened > created)
    }
}
