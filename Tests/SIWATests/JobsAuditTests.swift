import SIWAConfiguration
import AccountStore
import Foundation
import PostgresNIO
import Testing

/// `siwa jobs retry/cancel` record who acted from the database role they
/// logged in with (`session_user`), which no environment variable changes;
/// the login name is only a hint.
@Suite("Jobs audit actor", .testDatabases)
struct JobsAuditTests {
    /// A discarded job to retry, enqueued by the owner.
    static func discardedJob(in database: TestDatabase, sub: String) async throws -> Int64 {
        try await database.withClient { client in
            let rows = try await client.query(PostgresQuery(unsafeSQL: """
                INSERT INTO siwa.jobs (kind, args, state, attempt, max_attempts, finalized_at)
                VALUES ('purge_user', jsonb_build_object('apple_sub', '\(sub)', 'apple_team', 'TEAM123456'), 'discarded', 3, 3, now())
                RETURNING id
                """), logger: TestEnvironment.logger)
            for try await id in rows.decode(Int64.self) { return id }
            throw TestSetupError("no job inserted")
        }
    }

    /// The details of the newest audit row of `action`, as text per key.
    static func auditDetails(in database: TestDatabase, action: String) async throws -> [String: String] {
        try await database.withClient { client in
            let rows = try await client.query(PostgresQuery(unsafeSQL: """
                SELECT actor, coalesce(details->>'db_user', '∅'), coalesce(details->>'admin', '∅'),
                       coalesce(details->>'login_hint', '∅'), coalesce(details->>'job_id', '∅')
                FROM siwa.audit_log WHERE action = '\(action)' ORDER BY seq DESC LIMIT 1
                """), logger: TestEnvironment.logger)
            for try await (actor, dbUser, admin, hint, job) in rows.decode((String, String, String, String, String).self) {
                return ["actor": actor, "db_user": dbUser, "admin": admin, "login_hint": hint, "job_id": job]
            }
            return [:]
        }
    }

    @Test func retryAndCancelRecordTheDatabaseRoleNotTheEnvironment() async throws {
        let database = try await TestDatabase.create()
        let job = try await Self.discardedJob(in: database, sub: "actor.sub.1")

        // An admin's own role, and a caller who claims to be mallory.
        let admin = "siwa_test_actor_admin"
        let url = try await APIKeysTests.loginURL(admin, in: "siwa_admin", for: database)
        let retry = try await runSIWA(["jobs", "retry", String(job)], environment: [
            "SIWA_DATABASE_URL": url, "SUDO_USER": "mallory", "USER": "mallory", "LOGNAME": "mallory",
        ])
        #expect(retry.status == 0, "\(retry.output)")
        let retried = try await Self.auditDetails(in: database, action: "job.retry")
        #expect(retried["actor"] == "admin")
        #expect(retried["db_user"] == admin, "\(retried)")
        #expect(retried["admin"] == admin, "\(retried)")
        #expect(retried["login_hint"] == "mallory", "\(retried)")
        #expect(retried["job_id"] == String(job))

        // Without SUDO_USER the hint is the login name; the actor is still the role.
        let cancel = try await runSIWA(["jobs", "cancel", String(job)], environment: [
            "SIWA_DATABASE_URL": url, "SUDO_USER": "",
        ])
        #expect(cancel.status == 0, "\(cancel.output)")
        let cancelled = try await Self.auditDetails(in: database, action: "job.cancel")
        #expect(cancelled["db_user"] == admin, "\(cancelled)")
        #expect(cancelled["login_hint"] != "mallory", "\(cancelled)")
        #expect(cancelled["login_hint"] != "∅", "\(cancelled)")

        // Another role, another actor: the owner's URL records the owner.
        let again = try await runSIWA(["jobs", "retry", String(job)], environment: [
            "SIWA_DATABASE_URL": database.ownerURL, "SUDO_USER": "mallory",
        ])
        #expect(again.status == 0, "\(again.output)")
        let byOwner = try await Self.auditDetails(in: database, action: "job.retry")
        #expect(byOwner["db_user"] == database.configuration.username, "\(byOwner)")
        #expect(byOwner["login_hint"] == "mallory")

        // The service's own role is no admin: the function is not its to call.
        let asRuntime = try await runSIWA(["jobs", "retry", String(job)], environment: ["SIWA_DATABASE_URL": database.url])
        #expect(asRuntime.status == 1 && asRuntime.output.contains("permission denied for function change_job"), "\(asRuntime.output)")
    }

    /// The GRANTs deploy/README.md gives `siwa_admin` are enough for every
    /// `siwa jobs` command and a purge requested by hand (siwa.request_purge),
    /// and no more: an admin's own role (a member of siwa_admin) is what the
    /// audit row names, and it writes no table itself (sql/017).
    ///
    /// Creating roles needs the cluster's superuser (`postgres`, trust on
    /// loopback in the throwaway clusters); the roles are cluster-wide and
    /// made only if missing.
    @Test func anAdminRoleInSiwaAdminCanRunSiwaJobsAndIsNamedInTheAudit() async throws {
        let database = try await TestDatabase.create()
        let admin = "siwa_test_admin"
        try await Self.asSuperuser { client in
            try await client.query(PostgresQuery(unsafeSQL: """
                DO $$
                BEGIN
                  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'siwa_admin') THEN CREATE ROLE siwa_admin NOLOGIN; END IF;
                  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '\(admin)') THEN
                    CREATE ROLE \(admin) LOGIN PASSWORD '\(admin)' IN ROLE siwa_admin;
                  END IF;
                END $$
                """), logger: TestEnvironment.logger)
            try await client.query("GRANT siwa_auditor TO siwa_admin", logger: TestEnvironment.logger)
        }
        // siwa_admin's privileges come from sql/005_admin_role.sql.

        let job = try await Self.discardedJob(in: database, sub: "actor.sub.2")
        let url = try LeastPrivilegeTests.url(of: database.configuration, user: admin)
        for arguments in [["jobs", "list"], ["jobs", "show", String(job)], ["jobs", "retry", String(job)], ["jobs", "cancel", String(job)]] {
            let result = try await runSIWA(arguments, environment: ["SIWA_DATABASE_URL": url, "SUDO_USER": "alice"])
            #expect(result.status == 0, "\(arguments): \(result.output)")
        }
        let cancelled = try await Self.auditDetails(in: database, action: "job.cancel")
        #expect(cancelled["db_user"] == admin, "\(cancelled)")
        #expect(cancelled["login_hint"] == "alice")

        let adminConfiguration = try DatabaseConfiguration(url: url)
        #expect(try await AdminFunctionsTests.sqlState(of: """
            SELECT * FROM siwa.request_purge('actor.sub.3', 'TEAM123456', 'alice')
            """, on: adminConfiguration) == nil)
        for statement in ["DELETE FROM siwa.jobs", "UPDATE siwa.users SET email = NULL", "SELECT count(*) FROM siwa.notifications",
                          "TRUNCATE siwa.jobs", "DELETE FROM siwa.audit_log",
                          "INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{\"apple_sub\": \"actor.sub.3\", \"apple_team\": \"TEAM123456\"}')",
                          "UPDATE siwa.jobs SET state = 'available'", "INSERT INTO siwa.audit_log (actor, action) VALUES ('admin', 'x')"] {
            #expect(try await LeastPrivilegeTests.sqlState(of: statement, on: adminConfiguration) == "42501", "admin: \(statement)")
        }
    }

    static func asSuperuser(_ body: (PostgresClient) async throws -> Void) async throws {
        let server = try DatabaseConfiguration(url: try TestEnvironment.databaseURL)
        let superuser = try server.superuser(database: "postgres")
        try await superuser.withClient { try await body($0) }
    }
}
