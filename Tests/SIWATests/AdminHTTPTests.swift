import AccountLifecycle
import AccountStore
import Foundation
import PostgresNIO
import Testing

/// The admin listener over real HTTP, as `siwa serve` builds it: its own
/// port, admin keys only, changes audited with the key's name, bad input
/// answered 4xx with a reason, failed authentications counted and limited.
@Suite("Admin HTTP", .testDatabases)
struct AdminHTTPTests {
    /// siwa serve with the admin listener on a free port, an admin key and an app key.
    struct Setup {
        let server: ServerHarness
        let adminKey: String
        let adminKeyID: Int64
        let appKey: String

        static func start(failuresPerMinute: Int = 10) async throws -> Setup {
            let server = try await ServerHarness.start(settings: [
                "SIWA_ADMIN_HTTP_PORT": "0", "SIWA_ADMIN_AUTH_FAILURES_PER_MINUTE": String(failuresPerMinute),
            ])
            let (admin, app) = try await TestDatabase.withClient(server.database.configuration) { client in
                let keys = APIKeyAdministration(client: client, logger: TestEnvironment.logger)
                return (try await keys.create(name: "ops-alice", scope: .admin, loginHint: nil),
                        try await keys.create(name: "backend", loginHint: nil))
            }
            return Setup(server: server, adminKey: admin.key, adminKeyID: admin.row.id, appKey: app.key)
        }

        var adminURL: String { "http://127.0.0.1:\(server.adminPort ?? 0)" }

        func get(_ path: String, authorization: String? = nil) async throws -> HTTPAnswer {
            try await HTTPAnswer.send(method: .GET, url: adminURL + path, body: nil,
                                      headers: authorization.map { [("Authorization", $0)] } ?? [])
        }

        func post(_ path: String, authorization: String?, form: String? = nil, headers: [(String, String)] = []) async throws -> HTTPAnswer {
            var all = headers
            if let authorization { all.append(("Authorization", authorization)) }
            if form != nil { all.append(("Content-Type", "application/x-www-form-urlencoded")) }
            return try await HTTPAnswer.send(method: .POST, url: adminURL + path, body: form.map { Data($0.utf8) }, headers: all)
        }

        var bearer: String { "Bearer \(adminKey)" }

        static func basic(user: String = "admin", _ password: String) -> String {
            "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        }
    }

    @Test func onlyAdminKeysOpenTheAdminListenerWhichIsNotOnThePublicPort() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }

        let none = try await setup.get("/admin/jobs")
        #expect(none.status == 401 && none.reason == "unauthorized", "\(none.status) \(none.text)")
        #expect(none.headers["WWW-Authenticate"].contains(#"Basic realm="siwa admin", charset="UTF-8""#), "\(none.headers)")
        let app = try await setup.get("/admin/jobs", authorization: "Bearer \(setup.appKey)")
        #expect(app.status == 403 && app.reason == "forbidden", "\(app.status) \(app.text)")
        let admin = try await setup.get("/admin/jobs", authorization: setup.bearer)
        #expect(admin.status == 200 && admin.json["jobs"] is [Any], "\(admin.status) \(admin.text)")
        // The page loads nothing from anywhere and runs no script: a strict CSP.
        let page = try await setup.get("/admin", authorization: setup.bearer)
        #expect(page.status == 200 && page.headers["Content-Type"].first?.hasPrefix("text/html") == true)
        let policy = page.headers["Content-Security-Policy"].joined(separator: ",")
        for directive in ["default-src 'none'", "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'", "style-src 'sha256-"] {
            #expect(policy.contains(directive), "CSP lacks \(directive): \(policy)")
        }
        #expect(!policy.contains("unsafe") && !policy.contains("script-src") && !policy.contains("*"), "\(policy)")
        #expect(page.headers["X-Content-Type-Options"] == ["nosniff"] && page.headers["Cache-Control"] == ["no-store"])

        // Basic with the key as the password, whatever the user name (an empty one too).
        for user in ["admin", "", "someone else"] {
            let basic = try await setup.get("/admin/jobs", authorization: Setup.basic(user: user, setup.adminKey))
            #expect(basic.status == 200, "user '\(user)': \(basic.status) \(basic.text)")
        }
        let wrongBasic = try await setup.get("/admin/jobs", authorization: Setup.basic(setup.adminKey + "x"))
        #expect(wrongBasic.status == 401)
        #expect(try await setup.get("/admin/jobs", authorization: Setup.basic(setup.appKey)).status == 403)

        // The public listener, the one Apple reaches, has no admin route at all.
        for path in ["/admin", "/admin/jobs", "/admin/audit"] {
            let answer = try await HTTPAnswer.send(method: .GET, url: setup.server.baseURL + path, body: nil,
                                                   headers: [("Authorization", setup.bearer)])
            #expect(answer.status == 404, "\(path) on the public port: \(answer.status)")
        }
        // A path of the admin's asked with another method: 405 with the
        // methods it takes, before any key is asked for.
        let notAllowed = try await setup.get("/admin/jobs/5/retry")
        #expect(notAllowed.status == 405 && notAllowed.reason == "method_not_allowed", "\(notAllowed.status) \(notAllowed.text)")
        #expect(notAllowed.headers["Allow"] == ["POST"])
        // A revoked admin key stops at once.
        try await TestDatabase.withClient(setup.server.database.configuration) { client in
            _ = try await APIKeyAdministration(client: client, logger: TestEnvironment.logger).revoke(name: "ops-alice", loginHint: nil)
        }
        #expect(try await setup.get("/admin/jobs", authorization: setup.bearer).status == 401)
    }

    /// The page's check of the audit chain walks the whole log in serve,
    /// beside Apple's notifications: paced like the worker's walk, waited
    /// for at most 2 s, and finished in the background when longer, the
    /// page saying so meanwhile.
    @Test func theChainCheckOfALongLogGoesOnInTheBackground() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        // 45,000 sealed rows: over 4 s at 10,000 a second.
        try await setup.server.database.withClient { client in
            try await client.query("""
                INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
                SELECT 'test', 'test.bulk', 'sub.' || g, \(TestEnvironment.team), '{}' FROM generate_series(1, 45000) AS g
                """, logger: TestEnvironment.logger)
            let sealer = AuditSealer(client: client, logger: TestEnvironment.logger)
            #expect(try await eventually {
                _ = try await sealer.seal()
                return try await AuditChainTests.unsealed(setup.server.database) == 0
            })
        }
        func chainState() async throws -> String {
            let page = try await setup.get("/admin", authorization: setup.bearer)
            #expect(page.status == 200, "\(page.status)")
            guard let start = page.text.range(of: #"id="chain-state">"#), let end = page.text[start.upperBound...].range(of: "</p>") else {
                return ""
            }
            return String(page.text[start.upperBound..<end.lowerBound])
        }
        let clock = ContinuousClock()
        var first = ""
        let took = try await clock.measure { first = try await chainState() }
        #expect(first.hasPrefix("being verified since ") && first.contains("at most 10000 rows a second"), "\(first)")
        #expect(took < .seconds(10), "\(took)")
        #expect(try await eventually(upTo: .seconds(60)) { try await chainState().hasPrefix("verified: 45") })
    }

    @Test func retryAndCancelAreAuditedWithTheKeysName() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let database = setup.server.database
        let job = try await JobsAuditTests.discardedJob(in: database, sub: "admin.http.sub.1")

        let retried = try await setup.post("/admin/jobs/\(job)/retry", authorization: setup.bearer)
        #expect(retried.status == 200, "\(retried.status) \(retried.text)")
        let answered = try #require(retried.json["job"] as? [String: Any])
        #expect(answered["id"] as? Int == Int(job) && answered["state"] as? String == "available", "\(answered)")
        #expect(try await database.strings("SELECT state FROM siwa.jobs WHERE id = \(job)") == ["available"])
        let retryAudit = try await Self.audit(database, action: "job.retry")
        #expect(retryAudit["actor"] == "admin_key:ops-alice", "\(retryAudit)")
        #expect(retryAudit["api_key"] == "ops-alice" && retryAudit["api_key_id"] == String(setup.adminKeyID), "\(retryAudit)")
        #expect(retryAudit["db_user"] == TestDatabase.serveRole && retryAudit["job_id"] == String(job), "\(retryAudit)")
        #expect(retryAudit["apple_sub"] == "admin.http.sub.1")

        let cancelled = try await setup.post("/admin/jobs/\(job)/cancel", authorization: setup.bearer)
        #expect(cancelled.status == 200 && (cancelled.json["job"] as? [String: Any])?["state"] as? String == "cancelled",
                "\(cancelled.status) \(cancelled.text)")
        #expect(try await Self.audit(database, action: "job.cancel")["actor"] == "admin_key:ops-alice")

        // Run now: a purge held back for later is due at once; a due one is refused (409), unaudited.
        let held = try await database.strings("""
            INSERT INTO siwa.jobs (kind, args, run_at) VALUES ('purge_user', '{"apple_sub": "admin.http.sub.2", "apple_team": "TEAM123456"}', now() + interval '30 days')
            RETURNING id::text
            """).first ?? "0"
        let runNow = try await setup.post("/admin/jobs/\(held)/run-now", authorization: setup.bearer)
        #expect(runNow.status == 200 && (runNow.json["job"] as? [String: Any])?["state"] as? String == "available",
                "\(runNow.status) \(runNow.text)")
        #expect(try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE id = \(held) AND run_at <= now()") == 1)
        let runNowAudit = try await Self.audit(database, action: "job.run_now")
        #expect(runNowAudit["actor"] == "admin_key:ops-alice" && runNowAudit["db_user"] == TestDatabase.serveRole, "\(runNowAudit)")
        let dueAlready = try await setup.post("/admin/jobs/\(held)/run-now", authorization: setup.bearer)
        #expect(dueAlready.status == 409 && dueAlready.text.contains("due already"), "\(dueAlready.status) \(dueAlready.text)")

        // Refusals: a state that cannot change (409), no such job (404), a bad id (400); none audited.
        let again = try await setup.post("/admin/jobs/\(job)/cancel", authorization: setup.bearer)
        #expect(again.status == 409 && again.reason == "conflict" && again.text.contains("cancelled"), "\(again.status) \(again.text)")
        let missing = try await setup.post("/admin/jobs/999999/retry", authorization: setup.bearer)
        #expect(missing.status == 404 && missing.reason == "not_found", "\(missing.status) \(missing.text)")
        for id in ["abc", "0", "-1", "99999999999999999999"] {
            let bad = try await setup.post("/admin/jobs/\(id)/retry", authorization: setup.bearer)
            #expect(bad.status == 400 && bad.reason == "bad_parameter", "\(id): \(bad.status) \(bad.text)")
        }
        #expect(try await database.scalar("SELECT count(*)::int FROM siwa.audit_log WHERE action IN ('job.retry', 'job.cancel', 'job.run_now')") == 3)
        // An app key changes nothing.
        #expect(try await setup.post("/admin/jobs/\(job)/retry", authorization: "Bearer \(setup.appKey)").status == 403)
    }

    /// A browser sends Basic credentials on its own: its POST needs the
    /// page's token and must not come from another site.
    @Test func aBrowsersPostNeedsTheCSRFTokenAndTheSameOrigin() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let job = try await JobsAuditTests.discardedJob(in: setup.server.database, sub: "admin.http.sub.2")
        let basic = Setup.basic(setup.adminKey)

        let noToken = try await setup.post("/admin/jobs/\(job)/retry", authorization: basic, form: "job=\(job)")
        #expect(noToken.status == 403 && noToken.reason == "bad_csrf_token", "\(noToken.status) \(noToken.text)")
        let forged = try await setup.post("/admin/jobs/\(job)/retry", authorization: basic, form: "csrf=\(Int(Date().timeIntervalSince1970)).00ff")
        #expect(forged.status == 403 && forged.reason == "bad_csrf_token")
        // Basic without a form is still a browser's credential: no token, no change.
        #expect(try await setup.post("/admin/jobs/\(job)/retry", authorization: basic).status == 403)
        let crossSite = try await setup.post("/admin/jobs/\(job)/retry", authorization: basic, form: "csrf=x",
                                             headers: [("Sec-Fetch-Site", "cross-site")])
        #expect(crossSite.status == 403 && crossSite.reason == "cross_site")
        let otherOrigin = try await setup.post("/admin/jobs/\(job)/retry", authorization: basic, form: "csrf=x",
                                               headers: [("Origin", "https://evil.example")])
        #expect(otherOrigin.status == 403 && otherOrigin.reason == "cross_site")
        #expect(try await setup.server.database.strings("SELECT state FROM siwa.jobs WHERE id = \(job)") == ["discarded"])
    }

    /// The admins' questions as JSON: the same rows as `siwa audit --json`.
    @Test func theReportRoutesAnswerFromTheAuditViews() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let database = setup.server.database
        let fixture = try await AdminFixtures.seed(database)
        _ = try await setup.post("/admin/jobs/\(fixture.discarded)/retry", authorization: setup.bearer)

        let audit = try await setup.get("/admin/audit?sub=admin.discarded.sub&action=job.*&limit=10", authorization: setup.bearer)
        #expect(audit.status == 200, "\(audit.status) \(audit.text)")
        let entries = try #require(audit.json["entries"] as? [[String: Any]])
        #expect(entries.map { $0["action"] as? String } == ["job.retry", "job.enqueued"], "newest first: \(entries)")
        #expect(entries.first?["actor"] as? String == "admin_key:ops-alice")
        // The same filters and cursor as siwa audit list: by actor, before a time, older than a seq.
        let byKey = try await setup.get("/admin/audit?actor=admin_key:*&until=2999-01-01T00:00:00Z", authorization: setup.bearer)
        #expect((byKey.json["entries"] as? [[String: Any]])?.map { $0["action"] as? String } == ["job.retry"], "\(byKey.text)")
        let firstSeq = try #require(entries.first?["seq"] as? Int)
        let older = try await setup.get("/admin/audit?sub=admin.discarded.sub&action=job.*&before=\(firstSeq)", authorization: setup.bearer)
        #expect((older.json["entries"] as? [[String: Any]])?.map { $0["action"] as? String } == ["job.enqueued"], "\(older.text)")
        let since = try await setup.get("/admin/audit?action=notification.recorded&since=\(UTCTime.text(Date().addingTimeInterval(-3600)))",
                                        authorization: setup.bearer)
        #expect((since.json["entries"] as? [Any])?.isEmpty == false, "\(since.text)")

        let history = try await setup.get("/admin/users/\(fixture.lateSub)/history", authorization: setup.bearer)
        #expect(history.status == 200 && history.json["apple_sub"] as? String == fixture.lateSub, "\(history.text)")
        #expect((history.json["history"] as? [[String: Any]])?.contains { $0["action"] as? String == "job.enqueued" } == true)

        let summary = try await setup.get("/admin/summary?days=7", authorization: setup.bearer)
        let days = try #require(summary.json["days"] as? [[String: Any]])
        #expect(days.count == 7 && summary.json["purge_sla_hours"] as? Int == 72, "\(summary.text.prefix(400))")
        let attention = try #require(summary.json["attention"] as? [[String: Any]])
        #expect(Set(attention.compactMap { $0["job_id"] as? Int }) == [Int(fixture.late)], "the retried job left the list: \(attention)")

        let verify = try await setup.get("/admin/audit/verify", authorization: setup.bearer)
        #expect(verify.status == 200 && verify.json["ok"] as? Bool == true, "\(verify.text)")
        let head = try #require(verify.json["head"] as? [String: Any])
        let recorded = "\(head["seq"] as? Int ?? 0):\(head["hash"] as? String ?? "")"
        let again = try await setup.get("/admin/audit/verify?head=\(recorded)", authorization: setup.bearer)
        #expect(again.json["ok"] as? Bool == true, "\(again.text)")
        let wrongHead = try await setup.get("/admin/audit/verify?head=\(head["seq"] as? Int ?? 0):\(String(repeating: "0", count: 64))",
                                            authorization: setup.bearer)
        #expect(wrongHead.json["ok"] as? Bool == false && wrongHead.json["broken_at"] as? Int == head["seq"] as? Int, "\(wrongHead.text)")

        // A user's deletion receipts, newest first, as stored (the worker signs them; DeletionReceiptTests check them).
        try await database.withClient { client in
            for (job, receipt, age) in [(900_001, "aa.bb.cc", 2), (900_002, "dd.ee.ff", 1)] {
                try await client.query("""
                    INSERT INTO siwa.deletion_receipts (job_id, apple_sub, jti, key_id, receipt, issued_at)
                    VALUES (\(Int64(job)), 'purged.1.1', \(UUID().uuidString), 'kid', \(receipt), now() - make_interval(hours => \(Int32(age))))
                    """, logger: TestEnvironment.logger)
            }
        }
        let receipts = try await setup.get("/admin/receipts/purged.1.1", authorization: setup.bearer)
        #expect(receipts.status == 200 && receipts.json["receipts"] as? [String] == ["dd.ee.ff", "aa.bb.cc"], "\(receipts.text)")
        #expect(try await setup.get("/admin/receipts/nobody", authorization: setup.bearer).json["receipts"] as? [String] == [])
    }

    @Test func badParametersAre400WithAReason() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let cases = [
            ("/admin/jobs?state=stuck", "state must be one of"),
            ("/admin/jobs?limit=0", "limit must be a whole number in 1...1000"),
            ("/admin/jobs?limit=ten", "limit must be a whole number"),
            ("/admin/jobs?bogus=1", "unknown parameter 'bogus'"),
            ("/admin/jobs?kind=purge_user%27%3B", "kind must be a job kind's name"),
            // Only the kinds siwa has (JobKinds), named in the refusal.
            ("/admin/jobs?kind=purge", "kind must be a job kind's name (\(JobKinds.listed))"),
            ("/admin/jobs?state=discarded&state=available", "given twice"),
            ("/admin/audit?since=yesterday", "since must be an ISO 8601 time"),
            ("/admin/audit?action=DROP%20TABLE", "action must be an action name"),
            ("/admin/audit?limit=100000", "limit must be a whole number in 1...10000"),
            ("/admin/audit?actor=a%20b", "actor must be an actor"),
            ("/admin/audit?sub=%01", "sub must be an Apple sub"),
            ("/admin/summary?days=0", "days must be a whole number"),
            ("/admin/users/x/history?limit=-1", "limit must be a whole number"),
            ("/admin/audit/verify?head=12", "head must be SEQ:HASH"),
            ("/admin?days=abc", "days must be a whole number"),
            ("/admin?notice=hacked&job=1", "notice must be"),
            // Found by make fuzz-api: a job out of bounds without a notice was ignored (200).
            ("/admin?job=0", "job must be a whole number"),
            ("/admin/receipts/someone?all=1", "unknown parameter 'all'"),
        ]
        for (path, reason) in cases {
            let answer = try await setup.get(path, authorization: setup.bearer)
            #expect(answer.status == 400 && answer.reason == "bad_parameter", "\(path): \(answer.status) \(answer.text)")
            #expect((answer.json["detail"] as? String)?.contains(reason) == true, "\(path): \(answer.text)")
        }
        #expect(try await setup.get("/admin/jobs?state=discarded&limit=5", authorization: setup.bearer).status == 200)
        #expect(try await setup.get("/admin/jobs?kind=app_event", authorization: setup.bearer).status == 200)
        // An empty value is no value (a form's empty field), as docs/openapi.yaml says (allowEmptyValue).
        #expect(try await setup.get("/admin/jobs?kind=&state=&limit=", authorization: setup.bearer).status == 200)
    }

    /// Behind the ssh tunnel every admin comes from 127.0.0.1. One admin's
    /// typos (their key's prefix, a wrong secret) lock out that key for the
    /// minute, the right key too; another admin still gets in from the same
    /// address. Malformed keys share one count, an app key counts against
    /// its own prefix, and a guesser cycling through prefixes meets the
    /// address's limit (four times the prefix's), which then refuses everyone.
    @Test func failedAuthenticationsAreLimitedPerKeyPrefixAndPerAddress() async throws {
        let setup = try await Setup.start(failuresPerMinute: 3)
        try atTestEnd { await setup.server.stop() }
        let bob = try await TestDatabase.withClient(setup.server.database.configuration) { client in
            try await APIKeyAdministration(client: client, logger: TestEnvironment.logger).create(name: "ops-bob", scope: .admin, loginHint: nil).key
        }
        // No credentials at all: a browser's first request. Counted, never held against anyone.
        for _ in 0..<5 { #expect(try await setup.get("/admin/jobs").status == 401) }

        // Alice mistypes her key three times: her prefix is refused, her right key too.
        let typo = String(setup.adminKey.dropLast()) + (setup.adminKey.hasSuffix("A") ? "B" : "A")
        for _ in 0..<3 { #expect(try await setup.get("/admin/jobs", authorization: "Bearer \(typo)").status == 401) }
        let refused = try await setup.get("/admin/jobs", authorization: Setup.basic(typo))
        #expect(refused.status == 429 && refused.reason == "too_many_failures", "\(refused.status) \(refused.text)")
        #expect((refused.json["detail"] as? String)?.contains("with this key") == true, "\(refused.text)")
        let retryAfter = Int(refused.headers["Retry-After"].first ?? "") ?? 0
        #expect((1...60).contains(retryAfter), "\(refused.headers)")
        #expect(try await setup.get("/admin/jobs", authorization: setup.bearer).status == 429, "the guesser cannot tell")
        // Bob, from the same 127.0.0.1, still gets in.
        #expect(try await setup.get("/admin/jobs", authorization: "Bearer \(bob)").status == 200)

        // Malformed keys share one count; an app key has its own.
        #expect(try await setup.get("/admin/jobs", authorization: "Bearer siwa_nope").status == 401)
        #expect(try await setup.get("/admin/jobs", authorization: Setup.basic("guess")).status == 401)
        #expect(try await setup.get("/admin/jobs", authorization: "Bearer siwa_nope").status == 401)
        #expect(try await setup.get("/admin/jobs", authorization: "Bearer still-not-a-key").status == 429)
        for _ in 0..<3 { #expect(try await setup.get("/admin/jobs", authorization: "Bearer \(setup.appKey)").status == 403) }
        #expect(try await setup.get("/admin/jobs", authorization: "Bearer \(setup.appKey)").status == 429)
        #expect(try await setup.get("/admin/jobs", authorization: "Bearer \(bob)").status == 200)

        // A guesser with a fresh prefix each time: the address has had 9
        // failures; 3 more reach its limit (12), and then everyone waits.
        for _ in 0..<3 {
            #expect(try await setup.get("/admin/jobs", authorization: "Bearer \(Self.randomWellFormedKey())").status == 401)
        }
        let everyone = try await setup.get("/admin/jobs", authorization: "Bearer \(bob)")
        #expect(everyone.status == 429 && (everyone.json["detail"] as? String)?.contains("from this address") == true, "\(everyone.text)")

        let metrics = try await setup.server.getMetrics().text
        #expect(metrics.contains(#"siwa_admin_auth_failures_total{reason="missing"} 5"#), "\(metrics)")
        #expect(metrics.contains(#"siwa_admin_auth_failures_total{reason="invalid"} 9"#))
        #expect(metrics.contains(#"siwa_admin_auth_failures_total{reason="wrong_scope"} 3"#))
        #expect(metrics.contains("siwa_admin_auth_refused_total 5"))
    }

    /// A key of the right shape that no row holds: `siwa_<12 base32>_<43 base64url>`.
    static func randomWellFormedKey() -> String {
        let base32 = Array("abcdefghijklmnopqrstuvwxyz234567"), base64 = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        return "siwa_" + String((0..<12).map { _ in base32.randomElement() ?? "a" }) + "_"
            + String((0..<43).map { _ in base64.randomElement() ?? "A" })
    }

    /// The details of the newest audit row of `action`, as text per key (and its actor and sub).
    /// Support requests arrive by email: an admin key finds the active
    /// users with exactly that address (case aside), audited as a lookup
    /// that names the key and the subs found, never the address.
    @Test func anAdminKeyFindsAnActiveUserByTheirWholeEmailAddress() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.server.stop() }
        let database = setup.server.database
        try await database.execute("""
            INSERT INTO siwa.users (apple_sub, apple_team, email, status) VALUES
                ('find.active.0001', 'TEAM123456', 'Support.Case@Example.com', 'active'),
                ('find.gone.0001', 'TEAM123456', 'support.case@example.com', 'deleted'),
                ('find.near.0001', 'TEAM123456', 'support.case@example.co', 'active')
            """)
        func find(_ body: String, authorization: String) async throws -> HTTPAnswer {
            try await HTTPAnswer.send(method: .POST, url: setup.adminURL + "/admin/users/find", body: Data(body.utf8),
                                      headers: [("Authorization", authorization), ("Content-Type", "application/json")])
        }
        let found = try await find(#"{"email": "support.case@example.com"}"#, authorization: setup.bearer)
        #expect(found.status == 200, "\(found.text)")
        let users = found.json["users"] as? [[String: Any]] ?? []
        #expect(users.map { $0["apple_sub"] as? String } == ["find.active.0001"], "only the active user, only the whole address: \(found.text)")
        let audit = try await Self.audit(database, action: "user.looked_up")
        #expect(audit["actor"] == "admin_key:ops-alice" && audit["apple_sub"] == "find.active.0001" && audit["found"] == "1"
                && audit["by"] == "email", "\(audit)")
        #expect(try await database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'user.looked_up'
              AND (details::text ILIKE '%example%' OR details::text LIKE '%@%' OR details::text ILIKE '%support%')
            """) == 0, "no address in the audit row")

        let missed = try await find(#"{"email": "nobody@example.com"}"#, authorization: setup.bearer)
        #expect(missed.status == 200 && (missed.json["users"] as? [Any])?.isEmpty == true, "\(missed.text)")
        #expect(try await database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'user.looked_up' AND apple_sub IS NULL AND details->>'found' = '0'
            """) == 1)
        for bad in [#"{"email": "support"}"#, #"{"email": "a b@example.com"}"#, "not json"] {
            let refused = try await find(bad, authorization: setup.bearer)
            #expect(refused.status == 400, "\(bad): \(refused.status) \(refused.text)")
        }
        // A browser's credentials need the page's form and its token.
        let ambient = try await find(#"{"email": "support.case@example.com"}"#, authorization: Setup.basic(setup.adminKey))
        #expect(ambient.status == 403, "\(ambient.text)")
        let app = try await find(#"{"email": "support.case@example.com"}"#, authorization: "Bearer \(setup.appKey)")
        #expect(app.status == 401 || app.status == 403, "\(app.status)")
        #expect(try await database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'user.looked_up'") == 2)
    }

    static func audit(_ database: TestDatabase, action: String) async throws -> [String: String] {
        try await database.withClient { client in
            let rows = try await client.query(PostgresQuery(unsafeSQL: """
                SELECT actor, coalesce(apple_sub, ''), details::text FROM siwa.audit_log
                WHERE action = '\(action)' ORDER BY seq DESC LIMIT 1
                """), logger: TestEnvironment.logger)
            for try await (actor, sub, details) in rows.decode((String, String, String).self) {
                var result = (try JSONSerialization.jsonObject(with: Data(details.utf8)) as? [String: Any] ?? [:]).mapValues { "\($0)" }
                result["actor"] = actor
                result["apple_sub"] = sub
                return result
            }
            return [:]
        }
    }
}
