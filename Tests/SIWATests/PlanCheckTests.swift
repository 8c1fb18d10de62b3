import AccountStore
import AppleSimulator
import Foundation
import Testing

/// `siwa worker --check-plan`, the real binary: SQL statements PREPAREd on
/// their databases (nothing runs), a signed test request to each HTTP step,
/// one line per step, exit 0 or 1.
@Suite("Purge plan check", .testDatabases, .timeLimit(.minutes(10)))
struct PlanCheckTests {
    /// A good plan (SQL on siwa's database and on another one, a webhook):
    /// exit 0, one ok line per step; the downstream got one correctly signed
    /// request marked as a check; no statement ran.
    @Test func aGoodPlanPasses() async throws {
        let analytics = try await TestDatabase.create()
        try await analytics.execute("CREATE TABLE events (apple_sub text NOT NULL)")
        try await analytics.execute("INSERT INTO events VALUES ('checked')")
        let harness = try await WorkerHarness.start(analytics: analytics, planSteps: { hook in [
            ["name": WorkerHarness.sqlStep, "sql": ["DELETE FROM app.profiles WHERE apple_sub = $1",
                                                    "INSERT INTO app.purge_log (apple_sub, siwa_user_id) VALUES ($1, $2)"]],
            // CALL is not something PREPARE takes: the protocol's Parse checks it.
            ["name": "app-procedure", "sql": ["CALL app.forget($1)"]],
            ["name": WorkerHarness.analyticsStep, "database_url_env": "TEST_ANALYTICS_DATABASE_URL",
             "sql": ["DELETE FROM events WHERE apple_sub = $1"]],
            ["name": WorkerHarness.httpStep, "http": ["url": hook, "secret_env": "TEST_DOWNSTREAM_SECRET", "timeout_seconds": 5]],
        ] })
        try atTestEnd { await harness.stop() }
        try await harness.database.execute(
            "CREATE PROCEDURE app.forget(sub text) LANGUAGE sql AS 'DELETE FROM app.profiles WHERE apple_sub = sub'")
        try await harness.enqueue(subs: ["checked"])
        let result = try await runSIWA(["worker", "--check-plan"], environment: harness.settings)
        #expect(result.status == 0, "\(result.output)")
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.contains("ok   \(WorkerHarness.sqlStep): sql: 2 statements prepared on siwa's database (nothing run)"), "\(result.output)")
        #expect(lines.contains("ok   app-procedure: sql: 1 statement prepared on siwa's database (nothing run)"), "\(result.output)")
        #expect(lines.contains("ok   \(WorkerHarness.analyticsStep): sql: 1 statement prepared on the TEST_ANALYTICS_DATABASE_URL database (nothing run)"),
                "\(result.output)")
        #expect(lines.contains { $0.hasPrefix("ok   \(WorkerHarness.httpStep): http: 127.0.0.1 answered 204 to a signed test request (webhook-id siwa-check-") },
                "\(result.output)")
        #expect(!result.output.contains(harness.downstream.secret))

        let deliveries = harness.downstream.deliveries
        #expect(deliveries.count == 1)
        let check = try #require(deliveries.first)
        #expect(check.signatureValid)
        #expect(check.webhookID.hasPrefix("siwa-check-"))
        #expect(check.fields["type"] as? String == "siwa.plan_check")
        #expect(check.fields["step"] as? String == WorkerHarness.httpStep)
        #expect(check.fields["check_id"] as? String == check.webhookID)
        #expect(check.fields["apple_sub"] == nil)

        // Nothing ran: the app's rows and the job are as they were.
        let db = harness.database
        #expect(try await db.scalar("SELECT count(*) FROM app.profiles") == 1)
        #expect(try await db.scalar("SELECT count(*) FROM app.purge_log") == 0)
        #expect(try await analytics.scalar("SELECT count(*) FROM events") == 1)
        #expect(try await db.strings("SELECT state FROM siwa.jobs") == ["available"])
    }

    /// A statement on a table that does not exist: exit 1, the step named
    /// with the database's reason; the other steps are still checked.
    @Test func aMissingTableFailsItsStep() async throws {
        let harness = try await WorkerHarness.start(planSteps: { hook in [
            ["name": "app-data", "sql": ["DELETE FROM app.profiles WHERE apple_sub = $1", "DELETE FROM app.no_such_table WHERE apple_sub = $1"]],
            ["name": "notify-crm", "http": ["url": hook, "secret_env": "TEST_DOWNSTREAM_SECRET", "timeout_seconds": 5]],
        ] })
        try atTestEnd { await harness.stop() }
        let result = try await runSIWA(["worker", "--check-plan"], environment: harness.settings)
        #expect(result.status == 1, "\(result.output)")
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.contains(#"FAIL app-data: sql on siwa's database: statement 2: sqlstate 42P01: relation "app.no_such_table" does not exist"#),
                "\(result.output)")
        #expect(lines.contains { $0.hasPrefix("ok   notify-crm: http:") }, "\(result.output)")
    }

    /// An HTTP step whose downstream is not listening: exit 1, the step named.
    @Test func aClosedPortFailsItsStep() async throws {
        let closed = try freePort()
        let harness = try await WorkerHarness.start(planSteps: { _ in [
            ["name": "app-data", "sql": ["DELETE FROM app.profiles WHERE apple_sub = $1"]],
            ["name": "notify-gone", "http": ["url": "http://127.0.0.1:\(closed)/hooks/purge", "secret_env": "TEST_DOWNSTREAM_SECRET",
                                             "timeout_seconds": 10]],
        ] })
        try atTestEnd { await harness.stop() }
        let start = ContinuousClock.now
        let result = try await runSIWA(["worker", "--check-plan"], environment: harness.settings)
        // A refused connection fails at once, not at the step's timeout (10 s).
        #expect(ContinuousClock.now - start < .seconds(6))
        #expect(result.status == 1, "\(result.output)")
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.contains("ok   app-data: sql: 1 statement prepared on siwa's database (nothing run)"), "\(result.output)")
        #expect(lines.contains { $0.hasPrefix("FAIL notify-gone: http: could not reach 127.0.0.1") }, "\(result.output)")
        #expect(lines.filter { $0.hasPrefix("FAIL") }.count == 1)
    }

    /// The check honours each step's timeout_seconds: a PREPARE that waits
    /// on a lock held elsewhere is stopped by it.
    @Test func theCheckHonoursTheStepTimeout() async throws {
        let harness = try await WorkerHarness.start(planSteps: { _ in [
            ["name": "locked", "timeout_seconds": 1, "sql": ["DELETE FROM app.profiles WHERE apple_sub = $1"]],
        ] })
        try atTestEnd { await harness.stop() }
        // Hold an ACCESS EXCLUSIVE lock on the table while the check runs:
        // PREPARE needs a lock on it too, and waits.
        let db = harness.database
        let check = try await db.withClient { client in
            try await client.withConnection { connection in
                try await connection.query("BEGIN", logger: TestEnvironment.logger)
                try await connection.query("LOCK TABLE app.profiles IN ACCESS EXCLUSIVE MODE", logger: TestEnvironment.logger)
                let start = ContinuousClock.now
                let result = try await runSIWA(["worker", "--check-plan"], environment: harness.settings)
                let elapsed = ContinuousClock.now - start
                try await connection.query("ROLLBACK", logger: TestEnvironment.logger)
                return (result, elapsed)
            }
        }
        #expect(check.0.status == 1, "\(check.0.output)")
        #expect(check.0.output.contains("FAIL locked: sql on siwa's database: statement 1: timed out"), "\(check.0.output)")
        #expect(check.1 < .seconds(8))
    }
}
