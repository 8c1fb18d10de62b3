import Foundation
import SIWAClient
import Testing

/// An answer that says "stored" comes only after a COMMIT that succeeded:
/// a constraint trigger deferred to commit time ends its own session for
/// one sub (as a database shutdown or failover ends a session), and that
/// sub is answered 503 with nothing stored, while the others go on.
///
/// Why the writes that are answered run between BEGIN and COMMIT
/// (`guardedCommittedExecute`): PostgresNIO ends a statement's rows at
/// CommandComplete, before the commit of a statement run alone is known.
/// On loopback the server's CommandComplete and its FATAL arrive in one
/// read and PostgresNIO fails the statement; across a network they may
/// arrive apart, and the statement would have been answered as stored.
@Suite("Commit before the answer", .testDatabases)
struct CommitBeforeAnswerTests {
    /// As the owner: a check deferred to commit time on `table` that ends
    /// its own session for rows whose `apple_sub` is `sub` (a role may end
    /// its own backends).
    static func dieAtCommit(_ database: TestDatabase, table: String, sub: String) async throws {
        _ = try await database.scalar("""
            CREATE OR REPLACE FUNCTION public.die_at_commit() RETURNS trigger LANGUAGE plpgsql
            AS $$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); RETURN NULL; END $$
            """)
        _ = try await database.scalar("""
            CREATE CONSTRAINT TRIGGER die_at_commit AFTER INSERT ON \(table)
            DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.apple_sub = '\(sub)')
            EXECUTE FUNCTION public.die_at_commit()
            """)
    }

    @Test func aNotificationWhoseCommitFailsIsNotAcknowledged() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        try await Self.dieAtCommit(siwa.database, table: "siwa.notifications", sub: "commit.fails")

        let refused = try await siwa.post(token: siwa.notification("email-disabled", sub: "commit.fails", jti: "cf-1"))
        #expect(refused.status == 503, "\(refused.status) \(refused.text)")
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.notifications WHERE apple_sub = 'commit.fails'") == 0)
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = 'commit.fails'") == 0)

        // The writers carry on for everyone else.
        let other = try await siwa.post(token: siwa.notification("email-disabled", sub: "commit.works", jti: "cw-1"))
        #expect(other.status == 200, "\(other.status) \(other.text)")
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.notifications WHERE apple_sub = 'commit.works'") == 1)
    }

    @Test func aSignInWhoseCommitFailsIsNotAnswered() async throws {
        let setup = try await SignInTests.Setup.start()
        try atTestEnd { await setup.server.stop() }
        try await Self.dieAtCommit(setup.server.database, table: "siwa.users", sub: "001.commit.fails")

        let refused = try await setup.signIn(try setup.appleSignIn(sub: "001.commit.fails"))
        #expect(refused.status == 503, "\(refused.status) \(refused.text)")
        #expect(refused.value == nil && refused.reason == "unavailable", "\(refused.text)")
        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = '001.commit.fails'") == 0)

        let other = try await setup.signIn(try setup.appleSignIn(sub: "001.commit.works"))
        #expect(other.status == 200, "\(other.status) \(other.text)")
        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = '001.commit.works'") == 1)
    }
}
