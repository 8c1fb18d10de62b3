import AccountStore
import Foundation
import PostgresNIO
import Testing

/// sql/017: an admin's role (a member of siwa_admin) writes nothing itself;
/// every change goes through a function that checks it, makes it and
/// writes its audit row naming the caller; and every audit row is stamped
/// by the database, whatever its writer said.
@Suite("Admin functions", .testDatabases)
struct AdminFunctionsTests {
    static let admin = "siwa_test_fn_admin"

    static func adminConfiguration(_ database: TestDatabase) async throws -> (url: String, configuration: DatabaseConfiguration) {
        let url = try await APIKeysTests.loginURL(admin, in: "siwa_admin", for: database)
        return (url, try DatabaseConfiguration(url: url))
    }

    /// The SQLSTATE `statement` fails with (nil: it ran), rolled back either
    /// way. Its rows are read to the end: an error raised while a SELECT
    /// runs (a function's refusal) arrives with them, not with the answer
    /// to the query.
    static func sqlState(of statement: String, on configuration: DatabaseConfiguration) async throws -> String? {
        try await TestDatabase.withClient(configuration) { client in
            try await client.withConnection { connection in
                try await connection.query("BEGIN", logger: TestEnvironment.logger)
                do {
                    for try await _ in try await connection.query(PostgresQuery(unsafeSQL: statement), logger: TestEnvironment.logger) {}
                    try await connection.query("ROLLBACK", logger: TestEnvironment.logger)
                    return nil
                } catch let error as PSQLError {
                    try await connection.query("ROLLBACK", logger: TestEnvironment.logger)
                    return error.serverInfo?[.sqlState] ?? "?"
                }
            }
        }
    }

    /// A job in `state`, to run at `runAt` (SQL), enqueued by the owner.
    static func job(in database: TestDatabase, sub: String, state: String, runAt: String = "now()") async throws -> Int64 {
        try await database.withClient { client in
            let rows = try await client.query(PostgresQuery(unsafeSQL: """
                INSERT INTO siwa.jobs (kind, args, state, run_at, finalized_at)
                VALUES ('purge_user', jsonb_build_object('apple_sub', '\(sub)', 'apple_team', 'TEAM123456'), '\(state)', \(runAt),
                        CASE WHEN '\(state)' IN ('completed', 'discarded', 'cancelled') THEN now() END)
                RETURNING id
                """), logger: TestEnvironment.logger)
            for try await id in rows.decode(Int64.self) { return id }
            throw TestSetupError("no job inserted")
        }
    }

    /// What a forger with siwa_admin tried before sql/017, each refused now.
    @Test func anAdminsRoleCannotWriteTheTablesItself() async throws {
        let database = try await TestDatabase.create()
        let (_, admin) = try await Self.adminConfiguration(database)
        let job = try await Self.job(in: database, sub: "fn.forge.1", state: "available")
        for statement in [
            "UPDATE siwa.jobs SET steps_done = '{\"siwa.erase_personal_data\": \"2026-01-01\", \"app-data\": \"2026-01-01\"}' WHERE id = \(job)",
            "UPDATE siwa.jobs SET args = '{\"apple_sub\": \"someone.else\", \"apple_team\": \"TEAM123456\"}' WHERE id = \(job)",
            "UPDATE siwa.jobs SET state = 'completed' WHERE id = \(job)",
            "INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{\"apple_sub\": \"fn.forge.2\", \"apple_team\": \"TEAM123456\"}')",
            "INSERT INTO siwa.audit_log (actor, action, apple_sub, details, apple_team) VALUES ('apple', 'notification.recorded', 'fn.forge.1', '{\"consent_revoked\": true}', 'TEAM123456')",
            "INSERT INTO siwa.api_keys (name, prefix, secret_sha256, created_by) VALUES ('minted', 'abcdefghijkl', sha256('x'), 'nobody')",
            "UPDATE siwa.api_keys SET revoked_at = NULL",
            "SELECT nextval('siwa.audit_log_seq')",
            "DELETE FROM siwa.jobs",
        ] {
            #expect(try await Self.sqlState(of: statement, on: admin) == "42501", "admin: \(statement)")
        }
        // Reading is what it keeps.
        for statement in ["SELECT count(*) FROM siwa.jobs", "SELECT count(*) FROM siwa.audit_log", "SELECT name FROM siwa.api_keys"] {
            #expect(try await Self.sqlState(of: statement, on: admin) == nil, "admin: \(statement)")
        }
        #expect(try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE steps_done <> '{}' OR args->>'apple_sub' <> 'fn.forge.1'") == 0)
    }

    /// Each function's audit row names the caller's own role, both in the
    /// stamped `db_user` column and in its details, as the CLI runs them.
    @Test func eachFunctionsAuditRowNamesTheCaller() async throws {
        let database = try await TestDatabase.create()
        let (url, _) = try await Self.adminConfiguration(database)
        let env = ["SIWA_DATABASE_URL": url, "SUDO_USER": "alice"]
        let discarded = try await Self.job(in: database, sub: "fn.caller.1", state: "discarded")
        let later = try await Self.job(in: database, sub: "fn.caller.2", state: "available", runAt: "now() + interval '30 days'")

        for arguments in [["jobs", "retry", String(discarded)], ["jobs", "cancel", String(discarded)], ["jobs", "run-now", String(later)],
                          ["api-keys", "create", "fn-backend"], ["api-keys", "revoke", "fn-backend"]] {
            let result = try await runSIWA(arguments, environment: env)
            #expect(result.status == 0, "\(arguments): \(result.output)")
        }
        let purge = try await TestDatabase.withClient(try DatabaseConfiguration(url: url)) { client in
            try await client.query("SELECT job_id FROM siwa.request_purge('fn.caller.3', 'TEAM123456', 'alice')", logger: TestEnvironment.logger)
                .collect().first?.decode(Int64.self)
        }
        #expect(purge != nil)
        let rows = try await database.strings("""
            SELECT action || ' ' || actor || ' ' || db_user || ' ' || (details->>'db_user') || ' ' || coalesce(details->>'login_hint', '-')
            FROM siwa.audit_log
            WHERE action IN ('job.retry', 'job.cancel', 'job.run_now', 'api_key.created', 'api_key.revoked', 'purge.requested')
            ORDER BY seq
            """)
        #expect(rows == ["job.retry", "job.cancel", "job.run_now", "api_key.created", "api_key.revoked", "purge.requested"].map {
            "\($0) admin \(Self.admin) \(Self.admin) alice"
        }, "\(rows)")
        // The job enqueued by request_purge is the caller's too (sql/010's job.enqueued row).
        #expect(try await database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'job.enqueued' AND details->>'job_id' = '\(purge ?? 0)'
              AND db_user = '\(Self.admin)'
            """) == 1)
        // The key's row says what it is, never its hash.
        let created = try await database.strings("""
            SELECT details::text FROM siwa.audit_log WHERE action = 'api_key.created'
            """).joined()
        #expect(created.contains("\"scope\": \"app\"") && created.contains("\"prefix\"") && !created.contains("sha256"), "\(created)")
    }

    /// A change from the wrong state is refused with one clear line and
    /// writes nothing: no audit row, no change to the job.
    @Test func aBadChangeIsRefusedAndWritesNothing() async throws {
        let database = try await TestDatabase.create()
        let (url, _) = try await Self.adminConfiguration(database)
        let env = ["SIWA_DATABASE_URL": url]
        let completed = try await Self.job(in: database, sub: "fn.bad.1", state: "completed")
        let running = try await Self.job(in: database, sub: "fn.bad.2", state: "running")
        let due = try await Self.job(in: database, sub: "fn.bad.3", state: "available")
        let before = try await database.scalar("SELECT count(*) FROM siwa.audit_log")
        let jobsBefore = try await database.strings("SELECT id || state || run_at::text || max_attempts FROM siwa.jobs ORDER BY id")

        let refusals: [([String], String)] = [
            (["jobs", "cancel", String(completed)], "siwa: job \(completed) is completed; only a job that is available, retryable can be changed this way\n"),
            (["jobs", "retry", String(completed)],
             "siwa: job \(completed) is completed; only a job that is discarded, cancelled, retryable, available can be changed this way\n"),
            (["jobs", "run-now", String(running)], "siwa: job \(running) is running; only a job that is available, retryable can be changed this way\n"),
            (["jobs", "run-now", String(completed)], "siwa: job \(completed) is completed; only a job that is available, retryable can be changed this way\n"),
            (["jobs", "retry", "999999"], "siwa: no job with id 999999\n"),
            (["api-keys", "revoke", "nobody"], "siwa: no API key named 'nobody' (siwa api-keys list shows them)\n"),
        ]
        for (arguments, message) in refusals {
            let result = try await runSIWA(arguments, environment: env)
            #expect(result.status == 1 && result.output.hasSuffix(message), "\(arguments): \(result.output)")
        }
        let dueAlready = try await runSIWA(["jobs", "run-now", String(due)], environment: env)
        #expect(dueAlready.status == 1 && dueAlready.output.contains("siwa: job \(due) is due already (since "), "\(dueAlready.output)")

        // Straight to the function, a made-up change or a forged key is refused too.
        let admin = try DatabaseConfiguration(url: url)
        #expect(try await Self.sqlState(of: "SELECT siwa.change_job('complete', \(due), NULL)", on: admin) == "22023")
        #expect(try await Self.sqlState(of: "SELECT siwa.change_job_by_key('retry', \(completed), 1)", on: admin) == "42501")
        #expect(try await Self.sqlState(of: "SELECT siwa.change_job_by_key('cancel', \(due), 424242)",
                                                       on: try database.runtimeConfiguration) == "42501")
        #expect(try await Self.sqlState(of: """
            SELECT * FROM siwa.create_api_key('short', 'abcdefghijkl', '\\x00', 'app', NULL)
            """, on: admin) == "22023")

        #expect(try await database.scalar("SELECT count(*) FROM siwa.audit_log") == before)
        #expect(try await database.strings("SELECT id || state || run_at::text || max_attempts FROM siwa.jobs ORDER BY id") == jobsBefore)
    }

    /// `siwa jobs run-now`: a job held back (a consent-revoked purge's grace
    /// delay, a retry backing off) is due now, in the state it was in.
    @Test func runNowMovesAFutureJobToNow() async throws {
        let database = try await TestDatabase.create()
        let (url, _) = try await Self.adminConfiguration(database)
        let held = try await Self.job(in: database, sub: "fn.now.1", state: "available", runAt: "now() + interval '30 days'")
        let backingOff = try await Self.job(in: database, sub: "fn.now.2", state: "retryable", runAt: "now() + interval '2 hours'")

        let help = try await runSIWA(["jobs", "run-now", "--help"])
        #expect(help.output.contains("grace") && help.output.contains("SIWA_CONSENT_REVOKED_PURGE_DELAY_DAYS"), "\(help.output)")

        for id in [held, backingOff] {
            let result = try await runSIWA(["jobs", "run-now", String(id)], environment: ["SIWA_DATABASE_URL": url])
            #expect(result.status == 0 && result.output.hasPrefix("job \(id) is "), "\(result.output)")
        }
        #expect(try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE run_at <= now() AND id IN (\(held), \(backingOff))") == 2)
        #expect(try await database.strings("SELECT state FROM siwa.jobs WHERE id IN (\(held), \(backingOff)) ORDER BY id")
                == ["available", "retryable"])
        #expect(try await database.strings("""
            SELECT (details->>'job_id') || ' ' || (details->>'new_state') FROM siwa.audit_log WHERE action = 'job.run_now' ORDER BY seq
            """) == ["\(held) available", "\(backingOff) retryable"])
    }

    /// The trail stamps itself: seq, occurred_at and db_user are the
    /// database's, whatever an inserter (the runtime role here) wrote.
    @Test func anAuditRowGetsTheRealSeqTimeAndRole() async throws {
        let database = try await TestDatabase.create()
        let runtime = try database.runtimeConfiguration
        let stamped = try await TestDatabase.withClient(runtime) { client in
            try await client.query("""
                INSERT INTO siwa.audit_log (seq, occurred_at, db_user, actor, action)
                VALUES (9000000000, '2001-01-01', 'mallory', 'test', 'test.forged')
                RETURNING seq, occurred_at > now() - interval '1 minute', db_user
                """, logger: TestEnvironment.logger).collect().first?.decode((Int64, Bool, String).self)
        }
        let (seq, recent, dbUser) = try #require(stamped)
        #expect(seq < 1000 && recent && dbUser == TestDatabase.runtimeRole, "\(seq) \(recent) \(dbUser)")
        #expect(try await database.scalar("SELECT max(seq) FROM siwa.audit_log") == Int(seq))
        // The owner too: no default to override, the trigger decides.
        #expect(try await database.strings("""
            INSERT INTO siwa.audit_log (seq, occurred_at, db_user, actor, action)
            VALUES (1, '1999-01-01', NULL, 'test', 'test.owner') RETURNING (seq > \(seq))::text || ' ' || db_user
            """) == ["true \(database.configuration.username)"])
    }

    /// Every SECURITY DEFINER function runs with a search_path an inserter
    /// cannot plant objects in, and none is callable by PUBLIC.
    @Test func everyDefinerFunctionHasAFixedSearchPathAndNoPublicExecute() async throws {
        let database = try await TestDatabase.create()
        let definers = try await database.strings("""
            SELECT p.proname || ' ' || coalesce(array_to_string(p.proconfig, ';'), '-') || ' '
                   || has_function_privilege('public', p.oid, 'EXECUTE')::text
            FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace
            WHERE n.nspname = 'siwa' AND p.prosecdef ORDER BY p.proname
            """)
        #expect(definers.count >= 8, "\(definers)")
        for definer in definers {
            #expect(definer.hasSuffix(" search_path=pg_catalog, pg_temp false"), "\(definer)")
        }
    }
}
