import AccountStore
import Foundation
import PostgresNIO
import Testing

/// serve and worker run as a runtime role that owns nothing: it cannot
/// rewrite the audit trail nor undo the guards around it. Each statement
/// below succeeds for the owner (shown inside a rolled-back transaction)
/// and is refused to the runtime role.
@Suite("Least privilege", .testDatabases)
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
            INSERT INTO siwa.audit_log (actor, action, apple_sub) VALUES ('test', 'test.row', 'sub.1');
            INSERT INTO siwa.audit_chain (seq, prev_hash, row_hash) VALUES (1, decode(repeat('00', 32), 'hex'), decode(repeat('11', 32), 'hex'))
            """)

        // The owner can: each statement works in a transaction that is then rolled back.
        for statement in Self.ownerOnly {
            #expect(try await Self.sqlState(of: statement, on: database.configuration) == nil, "owner: \(statement)")
        }
        // The runtime role cannot: insufficient_privilege (42501).
        let runtime = try database.runtimeConfiguration
        for statement in Self.ownerOnly + Self.nobody {
            #expect(try await Self.sqlState(of: statement, on: runtime) == "42501", "runtime: \(statement)")
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
        for role in [TestDatabase.runtimeRole, "siwa_admin", "siwa_auditor"] {
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
    /// grants the runtime role named in SIWA_DATABASE_URL; with one role for
    /// both it warns.
    @Test func migrateGrantsTheRuntimeRoleAndWarnsWhenThereIsOnlyOne() async throws {
        let owner = try await MigrationTests.emptyDatabase()
        let ownerURL = try Self.url(of: owner, user: "siwa")
        let runtimeURL = try Self.url(of: owner, user: TestDatabase.runtimeRole)

        let split = try await runSIWA(["migrate"], environment: [
            "SIWA_MIGRATE_DATABASE_URL": ownerURL, "SIWA_DATABASE_URL": runtimeURL,
        ])
        #expect(split.status == 0, "\(split.output)")
        #expect(split.output.contains("granted the runtime privileges to \(TestDatabase.runtimeRole)"), "\(split.output)")
        #expect(!split.output.contains("warning"), "\(split.output)")
        let runtime = try DatabaseConfiguration(url: runtimeURL)
        #expect(try await Self.sqlState(of: "INSERT INTO siwa.jobs (kind) VALUES ('x')", on: runtime) == nil)
        #expect(try await Self.sqlState(of: "TRUNCATE siwa.jobs", on: runtime) == "42501")

        let single = try await runSIWA(["migrate"], environment: ["SIWA_DATABASE_URL": ownerURL])
        #expect(single.status == 0, "\(single.output)")
        #expect(single.output.contains("siwa: warning: siwa serve and siwa worker will connect as siwa, the owner"), "\(single.output)")
    }

    /// The SQLSTATE a statement fails with (nil: it succeeded), inside a
    /// transaction that is always rolled back.
    static func sqlState(of statement: String, on configuration: DatabaseConfiguration) async throws -> String? {
        try await TestDatabase.withClient(configuration) { client in
            try await client.withConnection { connection in
                try await connection.query("BEGIN", logger: TestEnvironment.logger)
                do {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: TestEnvironment.logger)
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
