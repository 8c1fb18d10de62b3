import AccountStore
import Foundation
import PostgresNIO
import SIWAConfiguration
import Testing

@Suite("Migrations", .testDatabases)
struct MigrationTests {
    static func emptyDatabase() async throws -> DatabaseConfiguration {
        try await TestDatabase.createEmpty(on: try DatabaseConfiguration(url: try TestEnvironment.databaseURL), prefix: "m_").configuration
    }

    func migrations(_ files: [String: String]) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for (name, sql) in files { try sql.write(to: dir.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        return dir
    }

    @Test func appliesInOrderOnceAndRefusesAnEditedFile() async throws {
        let database = try await Self.emptyDatabase()
        let dir = try migrations([
            "001_a.sql": "CREATE TABLE siwa.a (id int); -- a comment; with a semicolon\nINSERT INTO siwa.a VALUES (1);",
            "002_b.sql": "CREATE FUNCTION siwa.f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN 1; END $$; INSERT INTO siwa.a VALUES (2);",
        ])
        try await TestDatabase.withClient(database) { client in
            let first = try await Migrator(directory: dir).migrate(client: client, logger: TestEnvironment.logger)
            #expect(first == ["001_a", "002_b"])
            let second = try await Migrator(directory: dir).migrate(client: client, logger: TestEnvironment.logger)
            #expect(second.isEmpty)
            try await Migrator(directory: dir).checkUpToDate(client: client, logger: TestEnvironment.logger)

            try "CREATE TABLE siwa.a (id bigint);".write(to: dir.appendingPathComponent("001_a.sql"), atomically: true, encoding: .utf8)
            await #expect(throws: MigrationError.editedAfterApply(version: 1, name: "001_a")) {
                try await Migrator(directory: dir).migrate(client: client, logger: TestEnvironment.logger)
            }
            await #expect(throws: MigrationError.self) {
                try await Migrator(directory: dir).checkUpToDate(client: client, logger: TestEnvironment.logger)
            }
        }
    }

    @Test func aFailingMigrationLeavesNothingHalfApplied() async throws {
        let database = try await Self.emptyDatabase()
        let dir = try migrations(["001_bad.sql": "CREATE TABLE siwa.half (id int); SELECT no_such_function();"])
        try await TestDatabase.withClient(database) { client in
            await #expect(throws: (any Error).self) {
                try await Migrator(directory: dir).migrate(client: client, logger: TestEnvironment.logger)
            }
            let rows = try await client.query("SELECT to_regclass('siwa.half') IS NULL", logger: TestEnvironment.logger)
            for try await gone in rows.decode(Bool.self) { #expect(gone) }
        }
    }

    @Test func serveRefusesAnUnmigratedDatabaseWithOneClearLine() async throws {
        let database = try await Self.emptyDatabase()
        var components = URLComponents(string: try TestEnvironment.databaseURL)!
        components.path = "/\(database.database)"
        let result = try await runSIWA(["serve"], environment: [
            "SIWA_DATABASE_URL": components.string!, "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "app", "SIWA_HTTP_PORT": String(try freePort()),
            "SIWA_APPLE_JWKS_URL": "http://127.0.0.1:9/auth/keys", "SIWA_LOG_LEVEL": "critical",
        ])
        #expect(result.status != 0)
        #expect(result.output.contains("siwa migrate"), "\(result.output)")
    }

    @Test func theAuditLogIsAppendOnly() async throws {
        let db = try await TestDatabase.create()
        try await db.withClient { client in
            try await client.query("INSERT INTO siwa.audit_log (actor, action) VALUES ('test', 'x')", logger: TestEnvironment.logger)
            await #expect(throws: PSQLError.self) {
                try await client.query("UPDATE siwa.audit_log SET action = 'y'", logger: TestEnvironment.logger)
            }
            await #expect(throws: PSQLError.self) {
                try await client.query("DELETE FROM siwa.audit_log", logger: TestEnvironment.logger)
            }
        }
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'x'") == 1)
    }

    @Test func aPurgeCanBeEnqueuedByHandWithKindAndArgsOnly() async throws {
        let db = try await TestDatabase.create()
        try await db.withClient { client in
            try await client.query(#"INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{"apple_sub": "by-hand", "apple_team": "TEAM123456"}')"#,
                                   logger: TestEnvironment.logger)
            // ...and a second pending purge for the same sub is refused by the unique index.
            await #expect(throws: PSQLError.self) {
                try await client.query(#"INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{"apple_sub": "by-hand", "apple_team": "TEAM123456"}')"#,
                                       logger: TestEnvironment.logger)
            }
        }
        #expect(try await db.strings("SELECT state FROM siwa.jobs") == ["available"])
    }

    /// sql/024 keys users by team and sub. A database that holds users from
    /// before gets their team from `siwa migrate` (SIWA_APPLE_TEAM_ID, or the
    /// one team of SIWA_APPLE_CLIENTS_FILE); without one the migration is
    /// refused, writing nothing. Rows the audit chain sealed keep no team.
    @Test func usersFromBeforeTeamsTakeTheTeamMigrateIsGiven() async throws {
        let configuration = try await Self.emptyDatabase()
        let all = try Migrator(directory: TestEnvironment.repositoryRoot.appendingPathComponent("sql"))
        try await TestDatabase.withClient(configuration) { client in
            func strings(_ sql: String) async throws -> [String] {
                try await client.query(PostgresQuery(unsafeSQL: sql), logger: TestEnvironment.logger).collect().map { try $0.decode(String.self) }
            }
            try await Migrator(migrations: all.migrations.filter { $0.version < 24 }).migrate(client: client, logger: TestEnvironment.logger)
            for statement in [
                "INSERT INTO siwa.users (apple_sub, email) VALUES ('old.1', 'old@privaterelay.appleid.com')",
                "INSERT INTO siwa.notifications (jti, event_type, apple_sub, event_time, audience, issued_at, claims) VALUES ('n1', 'email-enabled', 'old.1', 0, 'app', now(), '{}')",
                #"INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{"apple_sub": "old.1"}')"#,
                "INSERT INTO siwa.audit_log (actor, action, apple_sub, details) VALUES ('test', 'test.old', 'old.1', '{}')",
            ] {
                try await client.query(PostgresQuery(unsafeSQL: statement), logger: TestEnvironment.logger)
            }
            do {
                try await all.migrate(client: client, logger: TestEnvironment.logger)
                Issue.record("sql/024 applied without a team for the users it found")
            } catch {
                #expect(String(reflecting: error).contains("this database holds users, and siwa now keys them by team and sub: run siwa migrate with SIWA_APPLE_TEAM_ID set"),
                        "\(String(reflecting: error))")
            }
            #expect(try await strings("SELECT count(*)::text FROM siwa.schema_migrations WHERE version = 24") == ["0"])
            #expect(try await strings("SELECT count(*)::text FROM information_schema.columns WHERE table_name = 'users' AND column_name = 'apple_team'") == ["0"])

            var upgrade = all
            upgrade.existingRowsTeam = "ABCDE12345"
            #expect(try await upgrade.migrate(client: client, logger: TestEnvironment.logger).first == "024_teams")
            #expect(try await strings("SELECT apple_team FROM siwa.users") == ["ABCDE12345"])
            #expect(try await strings("SELECT apple_team FROM siwa.notifications") == ["ABCDE12345"])
            #expect(try await strings("SELECT args->>'apple_team' FROM siwa.jobs WHERE kind = 'purge_user'") == ["ABCDE12345"])
            #expect(try await strings("SELECT coalesce(apple_team, 'none') FROM siwa.audit_log WHERE action = 'test.old'") == ["none"])
            // From now on a row naming a sub names its team; a second user of the same sub in another team is another row.
            await #expect(throws: (any Error).self) {
                try await client.query("INSERT INTO siwa.audit_log (actor, action, apple_sub) VALUES ('test', 'test.new', 'old.1')",
                                       logger: TestEnvironment.logger)
            }
            try await client.query("INSERT INTO siwa.users (apple_sub, apple_team) VALUES ('old.1', 'FGHIJ67890')", logger: TestEnvironment.logger)
            await #expect(throws: (any Error).self) {
                try await client.query("INSERT INTO siwa.users (apple_sub, apple_team) VALUES ('old.1', 'ABCDE12345')", logger: TestEnvironment.logger)
            }
        }
        // What `siwa migrate` passes: the one team configured, else none.
        #expect(AppleClientsSettings.singleTeam(SettingsReader(["SIWA_APPLE_TEAM_ID": "ABCDE12345"])) == "ABCDE12345")
        #expect(AppleClientsSettings.singleTeam(SettingsReader(["SIWA_APPLE_TEAM_ID": "lower"])) == nil)
        #expect(AppleClientsSettings.singleTeam(SettingsReader([:])) == nil)
    }
}

extension MigrationError: Equatable {
    public static func == (lhs: MigrationError, rhs: MigrationError) -> Bool { lhs.description == rhs.description }
}
