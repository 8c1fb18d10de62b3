import AccountStore
import Foundation
import PostgresNIO
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
}

extension MigrationError: Equatable {
    public static func == (lhs: MigrationError, rhs: MigrationError) -> Bool { lhs.description == rhs.description }
}
