import AccountLifecycle
import AccountStore
import Crypto
import Foundation
import Testing

/// The purge plan is checked whole at start-up; the retry policy and the
/// webhook signature are checked against their definitions.
@Suite("Purge plan and retry policy", .testDatabases, .timeLimit(.minutes(10)))
struct PurgePlanTests {
    static let environment = ["CRM_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "OTHER_DB": "postgres://u:p@127.0.0.1:5432/other"]

    static func parse(_ json: String) throws -> PurgePlan {
        try PurgePlan.parse(Data(json.utf8), environment: environment)
    }

    /// A purge decodes its own arguments from the claimed job's bytes: what
    /// it reads, as `args->>'key'` did (a key of another type reads as
    /// absent), and what it ignores (the keys its SQL reads).
    @Test func aPurgeReadsItsOwnArguments() throws {
        func parameters(_ json: String) throws -> PurgeParameters {
            try ClaimedJob(id: 1, kind: PurgeParameters.kind, attempt: 1, maxAttempts: 25, lease: "w/1", args: Data(json.utf8))
                .parameters(as: PurgeParameters.self)
        }
        let full = try parameters("""
            {"apple_sub": "001.a", "apple_team": "TEAM123456", "event_type": "consent-revoked", "jti": "n1", "purge_after": "2999-01-01T00:00:00.000000Z",
             "tokens_before": "2026-01-01T00:00:00Z"}
            """)
        #expect(full == PurgeParameters(appleSub: "001.a", appleTeam: "TEAM123456", eventType: "consent-revoked", purgeAfter: "2999-01-01T00:00:00.000000Z"))
        #expect(!full.tokensOnly)
        #expect(try parameters(#"{"apple_sub": "001.b", "apple_team": "TEAM123456", "scope": "tokens"}"#).tokensOnly)
        #expect(try parameters(#"{"apple_sub": 7, "event_type": null}"#) == PurgeParameters(appleSub: nil, appleTeam: nil))
        #expect(throws: DecodingError.self) { try parameters(#"["not", "an", "object"]"#) }
    }

    @Test func exampleShapedPlanParses() throws {
        let plan = try Self.parse("""
            {"steps": [
              {"name": "app-profile", "sql": ["DELETE FROM app.profiles WHERE apple_sub = $1;", "UPDATE app.orders SET user_id = NULL WHERE user_id = $2"]},
              {"name": "analytics", "database_url_env": "OTHER_DB", "sql": ["DELETE FROM events WHERE note = 'costs $5; paid' AND sub = $1"]},
              {"name": "notify-crm", "http": {"url": "https://crm.example/hook", "secret_env": "CRM_SECRET", "timeout_seconds": 2.5}}
            ]}
            """)
        #expect(plan.allStepNames == ["siwa.erase_personal_data", "app-profile", "analytics", "notify-crm"])
        guard case .sql(let statements, nil) = plan.steps[0].action else { Issue.record("not a local sql step"); return }
        #expect(statements.map(\.parameterCount) == [1, 2])
        #expect(statements[0].text == "DELETE FROM app.profiles WHERE apple_sub = $1")
        guard case .sql(let other, let database?) = plan.steps[1].action else { Issue.record("not an external sql step"); return }
        #expect(other[0].parameterCount == 1)
        #expect(database.environmentName == "OTHER_DB")
        guard case .http(let target) = plan.steps[2].action else { Issue.record("not an http step"); return }
        #expect(target.timeoutSeconds == 2.5)
        #expect(plan.steps.map(\.timeoutSeconds) == [60, 60, 2.5])
        let timed = try Self.parse(#"[{"name": "a", "sql": ["SELECT 1"], "timeout_seconds": 0.5}]"#)
        #expect(timed.steps.first?.timeoutSeconds == 0.5)
        // A bare list of steps is accepted too.
        #expect(try Self.parse(#"[{"name": "a", "sql": ["SELECT 1"]}]"#).steps.count == 1)
    }

    /// Each bad plan is refused with a message naming the step and the problem.
    @Test(arguments: [
        (#"{"steps": [{"name": "a", "sql": ["DELETE FROM t WHERE x = $4"]}]}"#, "step 'a': statement 1 uses $4"),
        (#"{"steps": [{"name": "a", "sql": ["DELETE FROM t; DELETE FROM u"]}]}"#, "step 'a': statement 1 holds more than one statement"),
        (#"{"steps": [{"name": "a", "sql": []}]}"#, "step 'a': \"sql\" must be a non-empty list"),
        (#"{"steps": [{"name": "a", "sql": ["  ;"]}]}"#, "step 'a': statement 1 is empty"),
        (#"{"steps": [{"name": "a", "sqll": ["SELECT 1"]}]}"#, "step 'a': unknown key(s) sqll"),
        (#"{"steps": [{"name": "a"}]}"#, "step 'a': needs \"sql\""),
        (#"{"steps": [{"name": "a", "sql": ["SELECT 1"], "http": {}}]}"#, "step 'a': has both"),
        (#"{"steps": [{"name": "a", "sql": ["SELECT 1"]}, {"name": "a", "sql": ["SELECT 2"]}]}"#, "step 'a': the name is used twice"),
        (#"{"steps": [{"name": "siwa.erase_personal_data", "sql": ["SELECT 1"]}]}"#, "step 'siwa.erase_personal_data': the name is used twice"),
        (#"{"steps": [{"name": "has space", "sql": ["SELECT 1"]}]}"#, "step #1: name 'has space' must be"),
        (#"{"steps": [{"sql": ["SELECT 1"]}]}"#, "step #1 has no \"name\""),
        (#"{"steps": [{"name": "b", "database_url_env": "UNSET_VARIABLE", "sql": ["SELECT 1"]}]}"#, "step 'b': database_url_env names UNSET_VARIABLE, which is not set"),
        (#"{"steps": [{"name": "c", "http": {"url": "ftp://x", "secret_env": "CRM_SECRET"}}]}"#, "step 'c': http.url must be an http(s) URL"),
        (#"{"steps": [{"name": "c", "http": {"url": "https://x", "secret_env": "NOPE"}}]}"#, "step 'c': http.secret_env names NOPE, which is not set"),
        (#"{"steps": [{"name": "c", "http": {"url": "https://x", "secret_env": "CRM_SECRET", "timeout_seconds": 0}}]}"#, "step 'c': http.timeout_seconds"),
        (#"{"steps": [{"name": "c", "http": {"url": "https://x", "secret_env": "CRM_SECRET", "retries": 3}}]}"#, "step 'c': unknown http key(s) retries"),
        (#"{"steps": "all"}"#, "\"steps\" must be a list"),
        (#"{"stepz": []}"#, "unknown top-level key(s): stepz"),
        (#"{"steps": [}"#, "is not valid JSON"),
        (#"{"steps": [{"name": "a", "sql": ["SELECT 1"], "timeout_seconds": 0}]}"#, "step 'a': timeout_seconds must be"),
        (#"{"steps": [{"name": "a", "sql": ["SELECT 1"], "timeout_seconds": "60"}]}"#, "step 'a': timeout_seconds must be"),
        (#"{"steps": [{"name": "a", "sql": ["SELECT 1"], "timeout_seconds": 3601}]}"#, "step 'a': timeout_seconds must be"),
        (#"{"steps": [{"name": "c", "timeout_seconds": 5, "http": {"url": "https://x", "secret_env": "CRM_SECRET"}}]}"#,
         "step 'c': an http step's timeout goes in http.timeout_seconds"),
    ])
    func badPlansAreRefusedNamingTheStep(json: String, expected: String) {
        do {
            _ = try Self.parse(json)
            Issue.record("accepted: \(json)")
        } catch {
            #expect("\(error)".contains(expected), "\(error)")
        }
    }

    /// Statements that would leave the step's transaction or siwa's role, or
    /// hide a second statement behind quotes or comments, are refused at
    /// load time with one line naming the step and the statement. Quotes
    /// and comments are read as PostgreSQL reads them.
    @Test(arguments: [
        // A second statement, however it is dressed up.
        ("DELETE FROM t WHERE a = $1; -- x", "holds more than one statement"),
        ("DELETE FROM t WHERE a = $1; /* x */", "holds more than one statement"),
        ("DELETE FROM t WHERE a = $1 -- it's\n; DROP TABLE t", "holds more than one statement"),
        ("DELETE FROM t /* ' */; DROP TABLE t /* ' */", "holds more than one statement"),
        ("DELETE FROM t WHERE a = '/*'; DROP TABLE t; -- */'", "holds more than one statement"),
        (#"DELETE FROM t WHERE a = E'\''; DROP TABLE t; --'"#, "holds more than one statement"),
        ("DELETE FROM t WHERE a = $1 /* /* */ ; DROP TABLE t", "unterminated /* comment"),
        ("DELETE FROM t WHERE a = 'x", "unterminated string literal"),
        ("DELETE FROM \"t WHERE a = $1", "unterminated quoted name"),
        // Transaction control.
        ("COMMIT", "controls the transaction (COMMIT)"),
        ("commit", "controls the transaction (COMMIT)"),
        ("/* first */ ROLLBACK", "controls the transaction (ROLLBACK)"),
        ("BEGIN", "controls the transaction (BEGIN)"),
        ("START TRANSACTION", "controls the transaction (START TRANSACTION)"),
        ("SAVEPOINT s1", "controls the transaction (SAVEPOINT)"),
        ("RELEASE SAVEPOINT s1", "controls the transaction (RELEASE)"),
        ("END", "controls the transaction (END)"),
        ("ABORT", "controls the transaction (ABORT)"),
        ("PREPARE TRANSACTION 'purge'", "controls the transaction (PREPARE TRANSACTION)"),
        ("ROLLBACK PREPARED 'purge'", "controls the transaction (ROLLBACK)"),
        // The role, and settings that outlive the step.
        ("SET ROLE app_admin", "changes the role (SET ROLE)"),
        ("set local role app_admin", "changes the role (SET ROLE)"),
        ("SET SESSION AUTHORIZATION app_admin", "changes the role (SET SESSION AUTHORIZATION)"),
        ("SET LOCAL SESSION AUTHORIZATION app_admin", "changes the role (SET SESSION AUTHORIZATION)"),
        ("SET LOCAL \"role\" = 'app_admin'", "changes the role (SET ROLE)"),
        ("RESET ROLE", "changes the role (RESET ROLE)"),
        ("RESET SESSION AUTHORIZATION", "changes the role (RESET SESSION AUTHORIZATION)"),
        ("RESET ALL", "uses RESET"),
        ("SET search_path = app", "uses SET without LOCAL"),
        ("SET LOCAL statement_timeout = 0", "sets statement_timeout"),
        ("SELECT set_config('role', 'app_admin', true)", "calls set_config"),
        ("DEALLOCATE ALL", "changes the connection's session state (DEALLOCATE)"),
        // Code blocks and dollar quotes ($1 and $2 stay fine).
        ("DO $$BEGIN DELETE FROM t; COMMIT; END$$", "dollar-quoted block"),
        ("DO $body$BEGIN NULL; END$body$", "dollar-quoted block"),
        ("DELETE FROM t WHERE a = $q$x$q$ AND b = $1", "dollar-quoted block"),
        ("DO 'BEGIN DELETE FROM t; END'", "is a code block (DO)"),
        ("DELETE FROM t WHERE a = $1 AND b = $4 -- $2", "uses $4"),
    ])
    func unsafeStatementsAreRefused(statement: String, expected: String) throws {
        let json = try JSONSerialization.data(withJSONObject: ["steps": [["name": "wipe", "sql": ["SELECT 1", statement]]]])
        do {
            _ = try PurgePlan.parse(json, environment: Self.environment)
            Issue.record("accepted: \(statement)")
        } catch {
            #expect("\(error)".hasPrefix("step 'wipe': statement 2 "), "\(error)")
            #expect("\(error)".contains(expected), "\(error)")
            #expect(!"\(error)".contains("\n"))
        }
    }

    /// What the refusals must not catch: `;` and `$4` inside quotes and
    /// comments, nested comments, E'' escapes, `$` inside names, SET LOCAL.
    @Test(arguments: [
        ("DELETE FROM t WHERE note = 'a; DROP TABLE t; --' AND sub = $1", 1),
        ("DELETE FROM t WHERE a = $1 /* ; DROP TABLE t */", 1),
        ("DELETE FROM t WHERE a = $1 -- trailing note; with $4", 1),
        ("DELETE FROM t WHERE a = $1 /* nested /* */ ; DROP TABLE t */", 1),
        ("DELETE FROM t WHERE a = $1 ;; ", 1),
        ("DELETE FROM \"odd;name\" WHERE \"x\"\"y\" = $2", 2),
        (#"DELETE FROM t WHERE a = E'it\'s; $4' AND b = $1"#, 1),
        ("UPDATE t SET price$4 = 0 WHERE sub = $1", 1),
        ("SET LOCAL lock_timeout = '5s'", 0),
        ("SELECT app.purge($1, $2::bigint)", 2),
        ("DELETE FROM t WHERE commit_note = 'BEGIN' AND sub = $1", 1),
    ])
    func safeStatementsAreAccepted(statement: String, parameters: Int) throws {
        let json = try JSONSerialization.data(withJSONObject: ["steps": [["name": "wipe", "sql": [statement]]]])
        let plan = try PurgePlan.parse(json, environment: Self.environment)
        guard case .sql(let statements, nil) = plan.steps.first?.action else { Issue.record("not a local sql step"); return }
        #expect(statements.first?.parameterCount == parameters)
        #expect(statements.first?.text.hasSuffix(";") == false)
        #expect(plan.steps.first?.timeoutSeconds == PurgePlan.defaultSQLTimeoutSeconds)
    }

    /// A webhook step's secret is a Standard Webhooks one (`whsec_` +
    /// base64 of 24 to 64 random bytes): a password, a long plain string
    /// (accepted before), or a whsec_ of 16 bytes is refused, naming the
    /// step and the variable, never quoting the secret.
    @Test(arguments: [
        ("short", "expected whsec_ followed by base64 of 24 to 64 random bytes"),
        ("correct-horse-battery-staple-1234", "expected whsec_ followed by base64 of 24 to 64 random bytes"),
        ("whsec_" + Data(repeating: 7, count: 16).base64EncodedString(), "the secret holds 16 bytes of key; expected 24 to 64"),
        ("whsec_" + Data(repeating: 7, count: 23).base64EncodedString(), "the secret holds 23 bytes of key; expected 24 to 64"),
        ("whsec_not base64!", "a whsec_ secret must be followed by base64"),
    ])
    func weakWebhookSecretsAreRefused(secret: String, expected: String) {
        do {
            _ = try PurgePlan.parse(Data(#"[{"name": "c", "http": {"url": "https://x", "secret_env": "S"}}]"#.utf8), environment: ["S": secret])
            Issue.record("accepted a weak secret")
        } catch {
            #expect("\(error)".contains("step 'c': http.secret_env S: \(expected)"), "\(error)")
            #expect(!"\(error)".contains(secret))
        }
        let strong = "whsec_" + Data(repeating: 7, count: 24).base64EncodedString()
        #expect(throws: Never.self) {
            try PurgePlan.parse(Data(#"[{"name": "c", "http": {"url": "https://x", "secret_env": "S"}}]"#.utf8), environment: ["S": strong])
        }
    }

    /// The worker at start and `siwa worker --check-plan` both refuse a weak
    /// webhook secret: exit 2, one line naming the plan, the step and the variable.
    @Test func workerAndCheckPlanRefuseAWeakWebhookSecret() async throws {
        let planFile = FileManager.default.temporaryDirectory.appendingPathComponent("weak-plan-\(UUID().uuidString).json").path
        try Data(#"{"steps": [{"name": "notify-crm", "http": {"url": "https://crm.example/hook", "secret_env": "CRM_SECRET"}}]}"#.utf8)
            .write(to: URL(fileURLWithPath: planFile))
        defer { try? FileManager.default.removeItem(atPath: planFile) }
        let environment = ["SIWA_DATABASE_URL": try TestEnvironment.databaseURL, "SIWA_PURGE_PLAN": planFile,
                           "CRM_SECRET": "a-long-password-someone-typed-in"]
        for arguments in [["worker"], ["worker", "--check-plan"]] {
            let result = try await runSIWA(arguments, environment: environment)
            #expect(result.status == 2, "\(arguments): \(result.output)")
            #expect(result.output.contains("siwa: SIWA_PURGE_PLAN: \(planFile): step 'notify-crm': http.secret_env CRM_SECRET: expected whsec_"),
                    "\(arguments): \(result.output)")
            #expect(!result.output.contains("a-long-password"))
        }
    }

    /// `siwa worker` with a bad plan stops at start-up: exit 2, one line naming the step.
    @Test func workerRefusesABadPlanAtStartUp() async throws {
        let planFile = FileManager.default.temporaryDirectory.appendingPathComponent("bad-plan-\(UUID().uuidString).json").path
        try Data(#"{"steps": [{"name": "wipe-sessions", "sql": ["DELETE FROM s WHERE a = $1 AND b = $7"]}]}"#.utf8)
            .write(to: URL(fileURLWithPath: planFile))
        defer { try? FileManager.default.removeItem(atPath: planFile) }
        let result = try await runSIWA(["worker"], environment: ["SIWA_DATABASE_URL": try TestEnvironment.databaseURL, "SIWA_PURGE_PLAN": planFile])
        #expect(result.status == 2)
        #expect(result.output.contains("siwa: SIWA_PURGE_PLAN: \(planFile): step 'wipe-sessions': statement 1 uses $7"), "\(result.output)")
        let missing = try await runSIWA(["worker"], environment: ["SIWA_DATABASE_URL": try TestEnvironment.databaseURL, "SIWA_PURGE_PLAN": "/nonexistent/plan.json"])
        #expect(missing.status == 2)
        #expect(missing.output.contains("cannot read /nonexistent/plan.json"), "\(missing.output)")
    }

    /// Without a plan the worker says at start that only the built-in step runs.
    @Test func workerWithoutPlanSaysSo() async throws {
        let database = try await TestDatabase.create()
        let worker = try SIWAProcess(environment: ["SIWA_DATABASE_URL": database.workerURL], arguments: ["worker"])
        try await worker.waitForLog("Worker started")
        #expect(worker.log.contains("no SIWA_PURGE_PLAN: only the built-in step runs"))
        #expect(await worker.terminate() == 0)
    }

    /// Retry n waits at least base x 2^(n-1), at most 20% more, capped at 6 h.
    @Test func backoffDoublesWithBoundedJitterAndACap() {
        for attempt in 1...30 {
            let plain = min(15 * pow(2, Double(attempt - 1)), 6 * 3600)
            #expect(Backoff.delay(attempt: attempt, baseSeconds: 15, jitter: 0) == plain)
            #expect(Backoff.delay(attempt: attempt, baseSeconds: 15, jitter: 0.2) == min(plain * 1.2, 6 * 3600))
            let random = Backoff.delay(attempt: attempt, baseSeconds: 15)
            #expect(random >= plain && random <= min(plain * 1.2, 6 * 3600))
        }
        #expect(Backoff.delay(attempt: 1, baseSeconds: 0.25, jitter: 0) == 0.25)
        #expect(Backoff.delay(attempt: 1000, baseSeconds: 15) == 6 * 3600)
    }

    /// The Standard Webhooks reference vector (the spec's own test suite).
    @Test func webhookSignatureMatchesTheSpecVector() throws {
        let key = try StandardWebhook.key(fromSecret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        let signature = StandardWebhook.signature(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1614265330,
                                                  body: Data(#"{"test": 2432232314}"#.utf8), key: key)
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }
}
