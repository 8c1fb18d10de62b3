import AccountStore
import AppleSimulator
import Foundation
import PostgresNIO
import Testing

/// Who can read the audit views and what they cost: siwa_auditor reads the
/// answers and nothing personal; one user's history goes through indexes;
/// the SLA comes from `siwa migrate`; earlier purges are backfilled; bad
/// arguments are one line.
@Suite("Audit access", .testDatabases, .timeLimit(.minutes(10)))
struct AuditAccessTests {
    static let auditor = "siwa_test_auditor"

    /// Columns holding an email address, a name, a token or a secret.
    static let personal = [
        "siwa.users.email", "siwa.users.is_private_email", "siwa.users.given_name", "siwa.users.family_name",
        "siwa.apple_tokens.refresh_token", "siwa.apple_tokens.access_token", "siwa.notifications.claims",
        "siwa.api_keys.secret_sha256", "siwa.sign_in_codes.code_sha256", "siwa.jobs.args", "siwa.jobs.errors",
    ]

    /// A person's login in siwa_auditor, as docs/audit-and-receipts.md shows (cluster-wide, made once).
    static func auditorURL(_ database: TestDatabase) async throws -> String {
        try await APIKeysTests.loginURL(auditor, in: "siwa_auditor", for: database)
    }

    @Test func theAuditorReadsTheAnswersAndNothingPersonal() async throws {
        let setup = try await SignInTests.Setup.start()
        try atTestEnd { await setup.server.stop() }
        let database = setup.server.database
        let sub = "001.auditor.0001"
        #expect(try await setup.signIn(try setup.appleSignIn(sub: sub, user: ["name": ["firstName": "Grace", "lastName": "H"]])).status == 200)
        let email = "grace.h@privaterelay.appleid.com"
        #expect(try await setup.server.post(token: setup.server.notification("email-enabled", sub: sub, email: email)).status == 200)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.notifications WHERE claims::text LIKE '%grace.h@%'") == 1)

        let url = try await Self.auditorURL(database)
        let configuration = try DatabaseConfiguration(url: url)
        for relation in ["siwa.user_history", "siwa.purge_latency", "siwa.purge_requests", "siwa.daily_summary", "siwa.attention",
                         "siwa.audit_log", "siwa.rejected_notifications", "siwa.report_settings"] {
            #expect(try await LeastPrivilegeTests.sqlState(of: "SELECT * FROM \(relation)", on: configuration) == nil, "\(relation)")
        }
        for column in Self.personal {
            let (table, name) = (column.split(separator: ".").prefix(2).joined(separator: "."), column.split(separator: ".").last ?? "")
            #expect(try await LeastPrivilegeTests.sqlState(of: "SELECT \(name) FROM \(table)", on: configuration) == "42501", "\(column)")
        }
        // No column the auditor may read, in any table or view of siwa, is one of them.
        let readable = try await database.strings("""
            SELECT table_schema || '.' || table_name || '.' || column_name FROM information_schema.columns
            WHERE table_schema = 'siwa'
              AND has_column_privilege('\(Self.auditor)', (quote_ident(table_schema) || '.' || quote_ident(table_name))::regclass,
                                       column_name, 'SELECT')
            """)
        #expect(Set(readable).isDisjoint(with: Self.personal), "\(readable)")
        #expect(readable.contains("siwa.user_history.details"))
        // And what the views show holds neither the email address nor the names.
        let shown = try await TestDatabase.withClient(configuration) { client in
            var text = ""
            for view in ["user_history", "purge_latency", "daily_summary", "attention"] {
                let rows = try await client.query(PostgresQuery(unsafeSQL: "SELECT row_to_json(v)::text FROM siwa.\(view) AS v"),
                                                  logger: TestEnvironment.logger)
                for try await row in rows.decode(String.self) { text += row + "\n" }
            }
            return text
        }
        #expect(shown.contains(sub) && shown.contains("email-enabled"))
        #expect(!shown.contains("@") && !shown.contains("Grace"), "\(shown)")

        for arguments in [["audit"], ["audit", "user", sub], ["audit", "summary", "--json"]] {
            let result = try await runSIWA(arguments, environment: ["SIWA_DATABASE_URL": url])
            #expect(result.status == 0 && !result.output.contains("@"), "\(arguments): \(result.output)")
        }
    }

    /// On tables with many rows and no statistics yet (no ANALYZE), one
    /// user's history and purges are read through the indexes on the sub.
    @Test func oneUsersHistoryIsReadThroughIndexes() async throws {
        let database = try await TestDatabase.create()
        try await database.execute("""
            INSERT INTO siwa.notifications (jti, event_type, apple_sub, event_time, audience, issued_at, claims)
            SELECT 'bulk-' || i, 'email-enabled', 'bulk.' || (i % 5000), 0, 'aud', now(), '{}' FROM generate_series(1, 15000) AS i;
            INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
            SELECT 'apple', 'notification.recorded', 'bulk.' || (i % 5000), 'TEAM123456', jsonb_build_object('n', i) FROM generate_series(1, 50000) AS i;
            INSERT INTO siwa.jobs (kind, args) SELECT 'purge_user', jsonb_build_object('apple_sub', 'bulk.' || i, 'apple_team', 'TEAM123456') FROM generate_series(1, 2000) AS i;
            """)
        for query in ["SELECT * FROM siwa.user_history WHERE apple_sub = 'bulk.7'",
                      "SELECT * FROM siwa.purge_latency WHERE apple_sub = 'bulk.7'"] {
            let plan = try await database.strings("EXPLAIN \(query)").joined(separator: "\n")
            #expect(!plan.contains("Seq Scan") && plan.contains("apple_sub_idx"), "\(query)\n\(plan)")
        }
        let history = try await AuditViewsTests.reports(database) { try await $0.user(appleSub: "bulk.7", limit: 1000) }
        #expect(history.history.filter { $0.source == "notification" }.count == 3)
        #expect(history.purges.count == 1 && history.purges.first?.state == "available")
    }

    /// A discarded job and a purge past the SLA (which `siwa migrate`
    /// records from SIWA_PURGE_SLA_HOURS) need attention; a younger purge does not.
    @Test func aDiscardedJobAndAPurgePastTheSLANeedAttention() async throws {
        let harness = try await WorkerHarness.start(settings: ["SIWA_JOB_MAX_ATTEMPTS": "1"])
        try atTestEnd { await harness.stop() }
        let database = harness.database
        harness.downstream.set(.alwaysFail)
        try await harness.enqueue(subs: ["doomed.1"])
        let worker = try harness.startWorker()
        #expect(try await harness.wait { try await harness.count(state: "discarded") == 1 }, "\(worker.log.suffix(2000))")
        #expect(await worker.terminate() == 0)

        let migrate = try await runSIWA(["migrate"], environment: [
            "SIWA_MIGRATE_DATABASE_URL": database.ownerURL, "SIWA_DATABASE_URL": database.url, "SIWA_PURGE_SLA_HOURS": "2",
        ])
        #expect(migrate.status == 0, "\(migrate.output)")
        try await database.execute("""
            INSERT INTO siwa.jobs (kind, args, created_at, run_at) VALUES
                ('purge_user', '{"apple_sub": "late.1", "apple_team": "TEAM123456", "event_type": "account-delete"}', now() - interval '3 hours', now() + interval '1 day'),
                ('purge_user', '{"apple_sub": "recent.1", "apple_team": "TEAM123456"}', now() - interval '1 hour', now() + interval '1 day')
            """)
        let summary = try await AuditViewsTests.reports(database) { try await $0.summary(days: 1) }
        #expect(summary.purgeSLAHours == 2)
        #expect(summary.attention.map(\.appleSub) == ["late.1", "doomed.1"], "oldest first: \(summary.attention)")
        let discarded = try #require(summary.attention.last)
        #expect(discarded.state == "discarded" && discarded.attempt == 1)
        #expect(discarded.lastError?.contains("notify-crm: 127.0.0.1 answered HTTP 500") == true, "\(discarded)")
        let late = try #require(summary.attention.first)
        #expect(late.state == "available")
        #expect(try await database.scalar("""
            SELECT count(*) FROM siwa.purge_latency AS p JOIN siwa.jobs AS j ON j.id = p.job_id
            WHERE p.apple_sub = 'late.1' AND p.requested_at = j.created_at AND p.state = 'available' AND p.completed_at IS NULL
            """) == 1, "requested when the job says, even when an operator backdates it")
        #expect(summary.days.first?.purgesFailed == 1)

        let table = try await runSIWA(["audit", "summary"], environment: ["SIWA_DATABASE_URL": database.url])
        #expect(table.output.contains("purge SLA: 2 h") && table.output.contains("needs attention (2)"), "\(table.output)")
        #expect(table.output.contains("notify-crm: 127.0.0.1 answered HTTP 500"), "\(table.output)")

        let bad = try await runSIWA(["migrate"], environment: [
            "SIWA_MIGRATE_DATABASE_URL": database.ownerURL, "SIWA_DATABASE_URL": database.url, "SIWA_PURGE_SLA_HOURS": "0",
        ])
        #expect(bad.status == 2 && bad.output == "siwa: SIWA_PURGE_SLA_HOURS: expected a whole number in 1...8760, got '0'\n",
                "\(bad.output)")
        let back = try await runSIWA(["migrate"], environment: [
            "SIWA_MIGRATE_DATABASE_URL": database.ownerURL, "SIWA_DATABASE_URL": database.url,
        ])
        #expect(back.status == 0, "\(back.output)")
        let json = try await runSIWA(["audit", "summary", "--json"], environment: ["SIWA_DATABASE_URL": database.url])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any], "\(json.output)")
        #expect(object["purge_sla_hours"] as? Int == 72)
        #expect((object["attention"] as? [[String: Any]])?.compactMap { $0["apple_sub"] as? String } == ["doomed.1"])
    }

    /// Purges requested before sql/010 get their `job.enqueued` row from
    /// the migration: from the queue while queued, else from the audit row
    /// that enqueued them.
    @Test func earlierPurgesAreBackfilled() async throws {
        let configuration = try await MigrationTests.emptyDatabase()
        let all = try Migrator(directory: TestEnvironment.repositoryRoot.appendingPathComponent("sql"))
        let owner = TestDatabase(url: "", ownerURL: "", configuration: configuration)
        try await owner.withClient { client in
            try await Migrator(migrations: all.migrations.filter { $0.version < 10 }).migrate(client: client, logger: TestEnvironment.logger)
        }
        try await owner.execute("""
            INSERT INTO siwa.jobs (kind, args, created_at) VALUES ('purge_user', '{"apple_sub": "old.queued", "event_type": "account-delete"}',
                                                                    now() - interval '2 hours');
            INSERT INTO siwa.audit_log (actor, action, apple_sub, details) VALUES
                ('apple', 'notification.recorded', 'old.done', '{"event_type": "account-delete", "purge_job_id": 900001}'),
                ('api', 'user.deletion_requested', 'old.cancelled', '{"job_id": 900002, "merged": false}'),
                ('apple', 'notification.recorded', 'old.signout', '{"event_type": "consent-revoked", "sign_out_job_id": 900003}')
            """)
        try await owner.execute("INSERT INTO siwa.audit_log (actor, action, apple_sub, details) VALUES ('worker', 'job.completed', 'old.done', '{\"job_id\": 900001}')")
        // The queued purge names a user: sql/024 needs the team of the rows it finds.
        var upgrade = all
        upgrade.existingRowsTeam = TestEnvironment.team
        try await owner.withClient { client in try await upgrade.migrate(client: client, logger: TestEnvironment.logger) }
        #expect(try await owner.strings("SELECT args->>'apple_team' FROM siwa.jobs WHERE args->>'apple_sub' = 'old.queued'") == [TestEnvironment.team])

        let rows = try await owner.strings("""
            SELECT apple_sub || ' ' || coalesce(event_type, '-') || ' ' || state FROM siwa.purge_latency ORDER BY apple_sub
            """)
        #expect(rows == ["old.cancelled app-deletion cancelled", "old.done account-delete completed", "old.queued account-delete available"])
        #expect(try await owner.scalar("""
            SELECT count(*) FROM siwa.purge_latency AS p, siwa.audit_log AS r, siwa.audit_log AS c
            WHERE p.apple_sub = 'old.done' AND r.action = 'notification.recorded' AND r.apple_sub = 'old.done'
              AND c.action = 'job.completed' AND c.apple_sub = 'old.done'
              AND p.requested_at = r.occurred_at AND p.completed_at = c.occurred_at AND p.seconds > 0
            """) == 1)
        #expect(try await owner.scalar("SELECT count(*) FROM siwa.purge_latency AS p JOIN siwa.jobs AS j ON j.id = p.job_id AND p.requested_at = j.created_at") == 1)
        #expect(try await owner.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'job.enqueued' AND actor = 'migrate' AND details->>'backfilled' = 'true'
            """) == 4, "the sign-out too, with its scope")
    }

    @Test(arguments: [
        (["audit", "--since", "yesterday"], "siwa: audit: --since: expected an ISO 8601 time"),
        (["audit", "--since", "2026-02-30"], "siwa: audit: --since: expected an ISO 8601 time"),
        (["audit", "--limit", "-1"], "siwa: audit: --limit must be a whole number from 1 to 100000, got '-1'"),
        (["audit", "list", "--limit", "ten"], "siwa: audit: --limit must be a whole number from 1 to 100000, got 'ten'"),
        (["audit", "user", "001.x", "--limit", "0"], "siwa: audit: --limit must be a whole number from 1 to 100000, got '0'"),
        (["audit", "summary", "--days", "0"], "siwa: audit: --days must be a whole number from 1 to 3660, got '0'"),
    ])
    func badArgumentsAreOneLineAndExitStatus2(_ arguments: [String], _ message: String) async throws {
        let result = try await runSIWA(arguments, environment: ["SIWA_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none"])
        #expect(result.status == 2, "\(result.output)")
        #expect(result.output.split(separator: "\n").count == 1 && result.output.hasPrefix(message), "\(result.output)")
    }

    @Test func helpExplainsTheCommands() async throws {
        let help = try await runSIWA(["audit", "--help"])
        #expect(help.status == 0)
        let words = help.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for text in ["siwa audit user SUB", "siwa audit summary", "siwa_auditor", "ISO 8601", "list (default)", "user", "summary"] {
            #expect(words.contains(text), "\(text): \(help.output)")
        }
        let list = try await runSIWA(["audit", "list", "--help"])
        #expect(list.output.contains("--since <time>") && list.output.contains("24h") && list.output.contains("'job.*'"), "\(list.output)")
        let summary = try await runSIWA(["audit", "summary", "--help"])
        #expect(summary.output.contains("SIWA_PURGE_SLA_HOURS"), "\(summary.output)")
    }

    @Test func timesAreISO8601InUTCOrASpanBeforeNow() throws {
        func at(_ text: String) -> Date { ISO8601DateFormatter().date(from: text) ?? .distantPast }
        let now = at("2026-05-10T12:00:00Z")
        let cases: [(String, Date)] = [
            ("2026-05-01", at("2026-05-01T00:00:00Z")),
            ("2026-05-01T12:30:00Z", at("2026-05-01T12:30:00Z")),
            ("2026-05-01 12:30", at("2026-05-01T12:30:00Z")),
            ("2026-05-01T14:30:00+02:00", at("2026-05-01T12:30:00Z")),
            ("2026-05-01T07:00:00-0530", at("2026-05-01T12:30:00Z")),
            ("2026-05-01T12:30:00.250Z", at("2026-05-01T12:30:00Z").addingTimeInterval(0.25)),
            ("90m", now.addingTimeInterval(-5400)),
            ("24h", at("2026-05-09T12:00:00Z")),
            ("7d", at("2026-05-03T12:00:00Z")),
        ]
        for (text, expected) in cases {
            #expect(AuditTime.parse(text, now: now) == expected, "\(text)")
        }
        for text in ["", "yesterday", "2026-02-30", "2026-05-01T24:00:00Z", "2026-05-01T12:00:00+15:00", "7w", "-1d", "2026-5-1"] {
            #expect(AuditTime.parse(text, now: now) == nil, "\(text)")
        }
    }
}
