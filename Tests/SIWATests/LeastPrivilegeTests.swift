import AccountStore
import Foundation
import PostgresNIO
import Testing

/// serve and worker run as runtime roles that own nothing: they cannot
/// rewrite the audit trail nor undo the guards around it. Each statement
/// below succeeds for the owner (shown inside a rolled-back transaction)
/// and is refused to the runtime roles. Each of serve and worker is
/// refused what only the other does, and the purge plan's SQL runs as a
/// role of its own.
@Suite("Least privilege", .testDatabases, .timeLimit(.minutes(10)))
struct LeastPrivilegeTests {
    static let ownerOnly = [
        "ALTER TABLE siwa.audit_log DISABLE TRIGGER audit_log_append_only",
        "ALTER TABLE siwa.audit_log DISABLE TRIGGER ALL",
        "ALTER TABLE siwa.audit_chain DISABLE TRIGGER ALL",
        "ALTER TABLE siwa.audit_log ALTER COLUMN seq SET DEFAULT 1",
        "ALTER TABLE siwa.jobs ADD COLUMN sneaky int",
        // CASCADE: the audit views (sql/010) depend on it.
        "DROP TABLE siwa.audit_log CASCADE",
        "DROP TABLE siwa.audit_chain",
        "DROP TRIGGER audit_log_no_truncate ON siwa.audit_log",
        "TRUNCATE siwa.jobs",
        "TRUNCATE siwa.notifications",
        "CREATE TABLE siwa.sneaky (id int)",
        "CREATE OR REPLACE FUNCTION siwa.refuse_audit_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
    ]

    /// Refused to everyone: the append-only triggers stop the owner too.
    static let nobody = [
        "UPDATE siwa.audit_log SET actor = 'someone else'",
        "DELETE FROM siwa.audit_log",
        "TRUNCATE siwa.audit_log",
        "UPDATE siwa.audit_chain SET row_hash = prev_hash",
        "DELETE FROM siwa.audit_chain",
        "TRUNCATE siwa.audit_chain",
    ]

    /// The log and its chain are append-only by privilege, not only by the
    /// triggers above (which the owner could drop): no role siwa runs as,
    /// nor an admin, holds UPDATE, DELETE or TRUNCATE on them.
    static let appendOnlyTables = ["siwa.audit_log", "siwa.audit_chain"]

    @Test func theRuntimeRoleCannotAlterTheAuditTrailOrTheSchema() async throws {
        let database = try await TestDatabase.create()
        try await database.execute("""
            INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team) VALUES ('test', 'test.row', 'sub.1', 'TEAM123456');
            INSERT INTO siwa.audit_chain (seq, prev_hash, row_hash) VALUES (1, decode(repeat('00', 32), 'hex'), decode(repeat('11', 32), 'hex'))
            """)

        // The owner can: each statement works in a transaction that is then rolled back.
        for statement in Self.ownerOnly {
            #expect(try await Self.sqlState(of: statement, on: database.configuration) == nil, "owner: \(statement)")
        }
        // The runtime role cannot: insufficient_privilege (42501).
        let runtime = try database.runtimeConfiguration
        for configuration in [runtime, try database.serveConfiguration, try database.workerConfiguration] {
            for statement in Self.ownerOnly + Self.nobody {
                #expect(try await Self.sqlState(of: statement, on: configuration) == "42501", "\(configuration.username): \(statement)")
            }
        }
        for statement in Self.nobody {
            #expect(try await Self.sqlState(of: statement, on: database.configuration) != nil, "owner: \(statement)")
        }
        // What the runtime role needs still works.
        #expect(try await Self.sqlState(of: """
            INSERT INTO siwa.audit_log (actor, action) VALUES ('worker', 'test.append')
            """, on: runtime) == nil)
        #expect(try await Self.sqlState(of: "SELECT count(*) FROM siwa.audit_log", on: runtime) == nil)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.audit_log WHERE actor = 'test'") == 1)
        for role in [TestDatabase.runtimeRole, TestDatabase.serveRole, TestDatabase.workerRole, "siwa_admin", "siwa_auditor"] {
            for table in Self.appendOnlyTables {
                #expect(try await database.strings("""
                    SELECT p FROM unnest(ARRAY['UPDATE', 'DELETE', 'TRUNCATE']) AS p WHERE has_table_privilege('\(role)', '\(table)', p)
                    """) == [], "\(role) on \(table)")
            }
        }

        // And siwa's own start-up check agrees.
        let problems = try await TestDatabase.withClient(runtime) { client in
            try await RuntimeRole.excessPrivileges(client: client, logger: TestEnvironment.logger)
        }
        #expect(problems.isEmpty)
        let ownerProblems = try await database.withClient { client in
            try await RuntimeRole.excessPrivileges(client: client, logger: TestEnvironment.logger)
        }
        #expect(ownerProblems == ["owns siwa's tables"])
    }

    /// `siwa migrate` connects as the owner (SIWA_MIGRATE_DATABASE_URL) and
    /// grants serve's and the worker's roles (SIWA_SERVE_ROLE,
    /// SIWA_WORKER_ROLE) each its own privileges; with one role for
    /// everything it warns.
    @Test func migrateGrantsEachProcessItsRoleAndWarnsWhenThereIsOnlyOne() async throws {
        let owner = try await MigrationTests.emptyDatabase()
        let ownerURL = try Self.url(of: owner, user: "siwa")

        let split = try await runSIWA(["migrate"], environment: ["SIWA_MIGRATE_DATABASE_URL": ownerURL])
        #expect(split.status == 0, "\(split.output)")
        #expect(split.output.contains("granted the serve privileges to \(TestDatabase.serveRole)"), "\(split.output)")
        #expect(split.output.contains("granted the worker privileges to \(TestDatabase.workerRole)"), "\(split.output)")
        #expect(!split.output.contains("warning"), "\(split.output)")
        let serve = try DatabaseConfiguration(url: try Self.url(of: owner, user: TestDatabase.serveRole))
        let worker = try DatabaseConfiguration(url: try Self.url(of: owner, user: TestDatabase.workerRole))
        #expect(try await Self.sqlState(of: "INSERT INTO siwa.jobs (kind) VALUES ('app_event')", on: serve) == nil)
        #expect(try await Self.sqlState(of: "INSERT INTO siwa.jobs (kind) VALUES ('x')", on: serve) == "42501")
        #expect(try await Self.sqlState(of: "INSERT INTO siwa.audit_chain (seq, prev_hash, row_hash) VALUES (1, '', '')", on: serve) == "42501")
        #expect(try await Self.sqlState(of: "INSERT INTO siwa.notifications (jti, event_type, apple_sub, event_time, audience, issued_at, claims) "
                                        + "VALUES ('j', 'e', 's', 1, 'a', now(), '{}')", on: worker) == "42501")
        #expect(try await Self.sqlState(of: "TRUNCATE siwa.jobs", on: worker) == "42501")

        // Only one of the two exists: a half-made setup is refused, naming it.
        let half = try await runSIWA(["migrate"], environment: [
            "SIWA_MIGRATE_DATABASE_URL": ownerURL, "SIWA_WORKER_ROLE": "siwa_no_such_worker",
        ])
        #expect(half.status == 2, "\(half.output)")
        #expect(half.output.contains("siwa: SIWA_WORKER_ROLE: the role siwa_no_such_worker does not exist, but siwa_serve does"), "\(half.output)")

        // Neither exists (a one-role trial): both sets go to SIWA_DATABASE_URL's user, with a warning.
        let runtimeURL = try Self.url(of: owner, user: TestDatabase.runtimeRole)
        let trial = try await runSIWA(["migrate"], environment: [
            "SIWA_MIGRATE_DATABASE_URL": ownerURL, "SIWA_DATABASE_URL": runtimeURL,
            "SIWA_SERVE_ROLE": "siwa_no_such_serve", "SIWA_WORKER_ROLE": "siwa_no_such_worker",
        ])
        #expect(trial.status == 0, "\(trial.output)")
        #expect(trial.output.contains("granted the runtime privileges to \(TestDatabase.runtimeRole)"), "\(trial.output)")
        #expect(trial.output.contains("siwa: warning: neither siwa_no_such_serve nor siwa_no_such_worker exists: siwa serve and siwa worker share siwa_app"),
                "\(trial.output)")
        let runtime = try DatabaseConfiguration(url: runtimeURL)
        #expect(try await Self.sqlState(of: "INSERT INTO siwa.jobs (kind) VALUES ('x')", on: runtime) == nil)
        #expect(try await Self.sqlState(of: "INSERT INTO siwa.audit_log (actor, action) VALUES ('worker', 'job.completed')", on: runtime) == nil)
        #expect(try await Self.sqlState(of: "TRUNCATE siwa.jobs", on: runtime) == "42501")

        let single = try await runSIWA(["migrate"], environment: [
            "SIWA_DATABASE_URL": ownerURL, "SIWA_SERVE_ROLE": "siwa_no_such_serve", "SIWA_WORKER_ROLE": "siwa_no_such_worker",
        ])
        #expect(single.status == 0, "\(single.output)")
        #expect(single.output.contains("siwa: warning: siwa serve and siwa worker will connect as siwa, the owner"), "\(single.output)")
    }

    /// serve's role (the internet-facing process) cannot write what only the
    /// worker writes: the audit chain, its seal mark, deletion receipts, a
    /// job's steps_done. The worker's role can; serve's still does its own job.
    @Test func serveCannotWriteTheChainTheSealMarkReceiptsOrStepsDone() async throws {
        let database = try await TestDatabase.create()
        try await database.execute("""
            INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team) VALUES ('test', 'test.row', 'sub.1', 'TEAM123456');
            INSERT INTO siwa.audit_seal_mark (seq, xid) VALUES (0, pg_current_xact_id());
            INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{"apple_sub": "sub.1", "apple_team": "TEAM123456"}');
            """)
        let workerOnly = [
            "INSERT INTO siwa.audit_chain (seq, prev_hash, row_hash) VALUES (1, decode(repeat('00', 32), 'hex'), decode(repeat('11', 32), 'hex'))",
            "UPDATE siwa.audit_seal_mark SET seq = 1000",
            "INSERT INTO siwa.audit_seal_mark (seq, xid) VALUES (5, pg_current_xact_id()) ON CONFLICT (only_row) DO UPDATE SET seq = 5",
            "INSERT INTO siwa.deletion_receipts (job_id, apple_sub, jti, key_id, receipt) VALUES (1, 'sub.1', 'j1', 'k', 'a.b.c')",
            #"UPDATE siwa.jobs SET steps_done = '{"siwa": "2026-01-01T00:00:00Z"}'"#,
            #"INSERT INTO siwa.jobs (kind, args, steps_done) VALUES ('purge_user', '{"apple_sub": "sub.2", "apple_team": "TEAM123456"}', '{"siwa": "x"}')"#,
            "UPDATE siwa.jobs SET locked_by = 'serve', attempt = 99",
            // A pending purge turned into a sign-out, or put off for years.
            #"UPDATE siwa.jobs SET args = args || '{"scope": "tokens"}'"#,
            "UPDATE siwa.jobs SET run_at = now() + interval '10 years'",
        ]
        let serve = try database.serveConfiguration
        let worker = try database.workerConfiguration
        for statement in workerOnly {
            #expect(try await Self.sqlState(of: statement, on: serve) == "42501", "serve: \(statement)")
        }
        for statement in workerOnly.prefix(5) {
            #expect(try await Self.sqlState(of: statement, on: worker) == nil, "worker: \(statement)")
        }
        // What serve does still works: enqueue deliveries, enqueue or merge a purge (a function), read.
        for statement in [
            #"INSERT INTO siwa.jobs (kind, args) VALUES ('app_event', '{"apple_sub": "sub.3", "apple_team": "TEAM123456"}')"#,
            "SELECT * FROM siwa.enqueue_purge('sub.3', 'TEAM123456', 'account-delete', 'j3', false, true)",
            "SELECT * FROM siwa.enqueue_purge('sub.1', 'TEAM123456', 'account-delete', 'j2', false, true)",
            "SELECT count(*) FROM siwa.audit_chain", "SELECT count(*) FROM siwa.deletion_receipts", "SELECT steps_done FROM siwa.jobs",
        ] {
            #expect(try await Self.sqlState(of: statement, on: serve) == nil, "serve: \(statement)")
        }
        #expect(try await database.strings("""
            SELECT p FROM unnest(ARRAY['INSERT', 'UPDATE']) AS p WHERE has_column_privilege('siwa_serve', 'siwa.jobs', 'steps_done', p)
            """) == [])
        let shared = try await TestDatabase.withClient(serve) { client in
            try await RuntimeRole.holdsOtherProcessPrivileges(.serve, client: client, logger: TestEnvironment.logger)
        }
        #expect(!shared)
    }

    /// serve's role writes only its own audit actions and only deliveries
    /// (row-level security, sql/019): a row the worker or an admin function
    /// writes, or a job of another kind, is refused. The worker's role and
    /// a one-role trial's are not limited.
    @Test func serveWritesOnlyItsOwnAuditActionsAndJobKinds() async throws {
        let database = try await TestDatabase.create()
        let refused = [
            "INSERT INTO siwa.audit_log (actor, action, apple_sub, details, apple_team) VALUES ('worker', 'job.completed', 'sub.1', '{\"job_id\": 1}', 'TEAM123456')",
            "INSERT INTO siwa.audit_log (actor, action, apple_sub, details, apple_team) VALUES ('worker', 'token.invalid_grant', 'sub.1', '{\"signed_out\": true}', 'TEAM123456')",
            "INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team) VALUES ('admin', 'purge.cancelled', 'sub.1', 'TEAM123456')",
            "INSERT INTO siwa.audit_log (actor, action) VALUES ('admin', 'api_key.created')",
            #"INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{"apple_sub": "sub.1", "apple_team": "TEAM123456"}')"#,
            #"INSERT INTO siwa.jobs (kind, args) VALUES ('validate_tokens', '{}')"#,
        ]
        let serve = try database.serveConfiguration
        for statement in refused {
            #expect(try await Self.sqlState(of: statement, on: serve) == "42501", "serve: \(statement)")
            #expect(try await Self.sqlState(of: statement, on: try database.workerConfiguration) == nil, "worker: \(statement)")
        }
        for action in ["notification.recorded", "user.signed_in", "user.account_restarted", "user.deletion_requested"] {
            let statement = "INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team) VALUES ('api', '\(action)', 'sub.1', 'TEAM123456')"
            #expect(try await Self.sqlState(of: statement, on: serve) == nil, "serve: \(statement)")
        }
        // Granted as the worker's role (or both), the same role loses the limit.
        #expect(try await database.strings("""
            SELECT policyname::text FROM pg_policies WHERE schemaname = 'siwa' AND 'siwa_serve' = ANY (roles) ORDER BY tablename
            """) == ["serve_writes_siwa_serve", "serve_writes_siwa_serve"])
        #expect(try await database.strings("""
            SELECT policyname::text FROM pg_policies WHERE schemaname = 'siwa' AND NOT 'public' = ANY (roles) AND NOT 'siwa_serve' = ANY (roles)
            """) == [])
    }

    /// The worker's role cannot do serve's job: record notifications or
    /// make (or even read) API keys; serve's role can record them.
    @Test func theWorkerCannotRecordNotificationsOrMakeAPIKeys() async throws {
        let database = try await TestDatabase.create()
        let serveOnly = [
            """
            INSERT INTO siwa.notifications (jti, event_type, apple_sub, event_time, audience, issued_at, claims)
            VALUES ('forged', 'consent-revoked', 'sub.1', 1, 'app', now(), '{}')
            """,
            """
            INSERT INTO siwa.api_keys (name, prefix, secret_sha256, created_by) VALUES ('sneaky', 'siwa_sneaky', decode(repeat('00', 32), 'hex'), 'worker')
            """,
            "SELECT secret_sha256 FROM siwa.api_keys",
            "INSERT INTO siwa.users (apple_sub, apple_team) VALUES ('made.up', 'TEAM123456')",
            "INSERT INTO siwa.rejected_notifications (received_at, reason, body_sha256, body_bytes) VALUES (now(), 'forged', '', 0)",
        ]
        let worker = try database.workerConfiguration
        for statement in serveOnly {
            #expect(try await Self.sqlState(of: statement, on: worker) == "42501", "worker: \(statement)")
        }
        #expect(try await Self.sqlState(of: serveOnly[0], on: try database.serveConfiguration) == nil)
        let shared = try await TestDatabase.withClient(worker) { client in
            try await RuntimeRole.holdsOtherProcessPrivileges(.worker, client: client, logger: TestEnvironment.logger)
        }
        #expect(!shared)
    }

    /// Refused deliveries: serve's role records them and cannot delete them
    /// (sql/020: its credentials cannot erase what was refused); the
    /// worker's role prunes them (on the worker that leads maintenance).
    @Test func onlyTheWorkerPrunesRefusedDeliveries() async throws {
        let database = try await TestDatabase.create()
        let insert = "INSERT INTO siwa.rejected_notifications (received_at, reason, body_sha256, body_bytes) VALUES (now(), 'test', '', 0)"
        let prune = "DELETE FROM siwa.rejected_notifications WHERE received_at < now() - interval '30 days'"
        let serve = try database.serveConfiguration
        let worker = try database.workerConfiguration
        #expect(try await Self.sqlState(of: insert, on: serve) == nil)
        #expect(try await Self.sqlState(of: "DELETE FROM siwa.rejected_notifications", on: serve) == "42501")
        #expect(try await Self.sqlState(of: prune, on: serve) == "42501")
        #expect(try await Self.sqlState(of: prune, on: worker) == nil)
    }

    /// A purge-plan SQL step on siwa's database runs as the purge role
    /// (SET LOCAL ROLE): a table granted to it alone is purged, though
    /// neither serve's role nor the worker's (NOINHERIT) may touch it, and
    /// the step is recorded as the worker's role once the step is done.
    @Test func aPlanStepRunsAsThePurgeRole() async throws {
        let harness = try await WorkerHarness.start(planSteps: { _ in
            [["name": "app-sql", "sql": [
                "DELETE FROM app.profiles WHERE apple_sub = $1",
                "INSERT INTO app.purged_by (apple_sub, role_name, session_role) VALUES ($1, current_user, session_user)",
            ]]]
        })
        try atTestEnd { await harness.stop() }
        try await harness.database.execute("""
            CREATE TABLE app.purged_by (apple_sub text NOT NULL, role_name text NOT NULL, session_role text NOT NULL);
            GRANT SELECT, INSERT ON app.purged_by TO \(TestDatabase.purgeRole);
            """)
        try await harness.enqueue(subs: ["purge.role.1"])
        let worker = try harness.startWorker()
        #expect(try await harness.wait { try await harness.count(state: "completed") == 1 }, "\(worker.log)")
        #expect(await worker.terminate() == 0)
        #expect(try await harness.database.strings("SELECT role_name || ' ' || session_role FROM app.purged_by")
                == ["\(TestDatabase.purgeRole) \(TestDatabase.workerRole)"])
        #expect(try await harness.database.scalar("SELECT count(*) FROM app.profiles WHERE apple_sub = 'purge.role.1'") == 0)
        for configuration in [try harness.database.serveConfiguration, try harness.database.workerConfiguration] {
            for statement in ["SELECT count(*) FROM app.profiles", "DELETE FROM app.profiles", "INSERT INTO app.purged_by VALUES ('x', 'y', 'z')"] {
                #expect(try await Self.sqlState(of: statement, on: configuration) == "42501", "\(configuration.username): \(statement)")
            }
        }
        // serve's role cannot become the purge role either.
        #expect(try await Self.sqlState(of: "SET LOCAL ROLE \(TestDatabase.purgeRole)", on: try harness.database.serveConfiguration) == "42501")
    }

    /// A plan with an SQL step on siwa's database and no purge role to run
    /// it as stops the worker (and --check-plan) at start, naming the role:
    /// not a failure at the first purge.
    @Test func aMissingPurgeRoleStopsTheWorkerAtStart() async throws {
        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        for arguments in [["worker"], ["worker", "--check-plan"]] {
            let missing = try await runSIWA(arguments, environment: harness.settings.merging(["SIWA_PURGE_ROLE": "siwa_no_such_purge"]) { $1 })
            #expect(missing.status == 2, "\(arguments): \(missing.output)")
            #expect(missing.output.contains("siwa: SIWA_PURGE_ROLE: the role siwa_no_such_purge does not exist"), "\(arguments): \(missing.output)")
            let notGranted = try await runSIWA(arguments, environment: harness.settings.merging(["SIWA_PURGE_ROLE": "siwa_auditor"]) { $1 })
            #expect(notGranted.status == 2, "\(arguments): \(notGranted.output)")
            #expect(notGranted.output.contains("siwa: SIWA_PURGE_ROLE: siwa_worker may not act as siwa_auditor"), "\(arguments): \(notGranted.output)")
        }
        #expect(try await harness.count(state: "completed") == 0)
    }

    /// serve and worker on one shared role (a one-role trial) each warn at
    /// start; on their own roles they do not.
    @Test func serveAndWorkerWarnWhenTheyShareARole() async throws {
        let database = try await TestDatabase.create()
        let base = ["SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "app", "SIWA_APPLE_JWKS_URL": "http://127.0.0.1:9/auth/keys"]
        let warning = "run with a shared database role"
        for (url, shared) in [(database.url, true), (database.serveURL, false)] {
            let serve = try SIWAProcess(port: try freePort(), environment: base.merging(["SIWA_DATABASE_URL": url]) { $1 })
            try await serve.waitForLog("Listening")
            #expect(serve.log.contains(warning) == shared, "\(serve.log)")
            _ = await serve.terminate()
        }
        for (url, shared) in [(database.url, true), (database.workerURL, false)] {
            let worker = try SIWAProcess(environment: ["SIWA_DATABASE_URL": url], arguments: ["worker"])
            try await worker.waitForLog("Worker started")
            #expect(worker.log.contains(warning) == shared, "\(worker.log)")
            _ = await worker.terminate()
        }
    }

    /// The SQLSTATE a statement fails with (nil: it succeeded), inside a
    /// transaction that is always rolled back.
    static func sqlState(of statement: String, on configuration: DatabaseConfiguration) async throws -> String? {
        try await TestDatabase.withClient(configuration) { client in
            try await client.withConnection { connection in
                try await connection.query("BEGIN", logger: TestEnvironment.logger)
                do {
                    // Read every row: an error may come after the row description.
                    let rows = try await connection.query(PostgresQuery(unsafeSQL: statement), logger: TestEnvironment.logger)
                    for try await _ in rows {}
                    try await connection.query("ROLLBACK", logger: TestEnvironment.logger)
                    return nil
                } catch let error as PSQLError {
                    try await connection.query("ROLLBACK", logger: TestEnvironment.logger)
                    return error.serverInfo?[.sqlState] ?? "?"
                }
            }
        }
    }

    static func url(of configuration: DatabaseConfiguration, user: String) throws -> String {
        "postgres://\(user):\(user)@\(configuration.host):\(configuration.port)/\(configuration.database)"
    }
}
