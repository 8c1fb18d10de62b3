import AccountStore
import Foundation
import PostgresNIO
import Testing

/// A consent revocation under `sign_out` racing a sign-in, with the
/// interleavings driven by hand on real connections (as the runtime role):
/// the tokens a sign-in stored before the revocation are revoked, those of
/// a sign-in after it are kept, whatever each statement's snapshot saw.
@Suite("Sign-out races", .testDatabases, .timeLimit(.minutes(10)))
struct SignOutRaceTests {
    static func revocation(_ jti: String, sub: String, at eventTime: Int64, purge: Bool = false) -> InboxEntry {
        InboxBatchTests.entry(jti, sub: sub, at: eventTime, UserEffect(status: .consentRevoked, enqueuePurge: purge),
                              type: "consent-revoked")
    }

    /// What siwa.sign_in does to a signed-in user's row and token, on a
    /// connection that holds the user's row already.
    static func signIn(_ sub: String, client: String, iat: Int64, on connection: OpenConnection) async throws {
        try await connection.run("""
            UPDATE siwa.users SET status = 'active', status_event_time = \(iat), last_sign_in_at = now() WHERE apple_sub = '\(sub)'
            """)
        try await connection.run("""
            INSERT INTO siwa.apple_tokens AS t (user_id, client_id, key_id, refresh_token, validate_after)
            SELECT id, '\(client)', 'k1', '\\x01', now() FROM siwa.users WHERE apple_sub = '\(sub)'
            ON CONFLICT ON CONSTRAINT apple_tokens_pkey DO UPDATE SET refresh_token = excluded.refresh_token, stored_at = now()
            """)
    }

    static func lockWaiters(_ database: TestDatabase) async throws -> Int {
        try await database.scalar("""
            SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
            WHERE NOT l.granted AND a.datname = current_database()
            """)
    }

    /// The pending sign-out's id, and the clients whose tokens it revokes
    /// (as the worker reads them: AppleTokenStore.tokens).
    static func signOut(_ database: TestDatabase, sub: String) async throws -> (job: Int64, clients: [String])? {
        try await TestDatabase.withClient(database.workerConfiguration) { client in
            let rows = try await client.query("""
                SELECT id FROM siwa.jobs WHERE args->>'apple_sub' = \(sub) AND args->>'scope' = 'tokens'
                  AND state IN ('available', 'running', 'retryable')
                """, logger: TestEnvironment.logger).collect()
            guard let job = try rows.first?.decode(Int64.self) else { return nil }
            let store = AppleTokenStore(client: client, queue: JobQueue(client: client, worker: "test", logger: TestEnvironment.logger),
                                        logger: TestEnvironment.logger)
            return (job, try await store.tokens(appleSub: sub, team: TestEnvironment.team, signOut: job).map(\.clientID))
        }
    }

    /// The interleaving, end to end: a sign-in storing the user's
    /// first token holds the row while a newer `consent-revoked` waits for
    /// it. The revocation sees the token (its statement's snapshot did not)
    /// and the worker revokes it at Apple.
    @Test func aFirstTokenStoredUnderAWaitingRevocationIsRevoked() async throws {
        let setup = try await AccountDeletionTests.Setup.start(server: ["SIWA_ON_CONSENT_REVOKED": "sign_out"])
        try atTestEnd { await setup.stop() }
        let db = setup.database
        let sub = "001.race.0001"
        // A real sealed token, set aside: the session below stores it as
        // the user's first, holding the user's row as siwa.sign_in does.
        let (_, token) = try await setup.signedIn(sub)
        try await db.execute("""
            CREATE TABLE public.first_token AS SELECT * FROM siwa.apple_tokens;
            DELETE FROM siwa.apple_tokens;
            """)
        let revoked = try await OpenConnection.with(db.configuration) { signIn in
            try await signIn.run("BEGIN")
            try await signIn.run("SELECT FROM siwa.users WHERE apple_sub = '\(sub)' FOR UPDATE")
            let notification = try setup.signIn.server.notification("consent-revoked", sub: sub, eventTime: Date().addingTimeInterval(5))
            let revocation = Task { try await setup.signIn.server.post(token: notification) }
            #expect(try await eventually(upTo: .seconds(20)) { try await Self.lockWaiters(db) == 1 })
            try await signIn.run("INSERT INTO siwa.apple_tokens SELECT * FROM public.first_token")
            try await signIn.run("COMMIT")
            return try await revocation.value
        }
        #expect(revoked.status == 200, "\(revoked.text)")
        #expect(try await db.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["consent_revoked"])
        #expect(try await Self.signOut(db, sub: sub)?.clients == [ServerHarness.clientID])

        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait(upTo: .seconds(30)) {
            try await db.scalar("SELECT count(*) FROM siwa.apple_tokens") == 0
        }, "\(worker.log.suffix(3000))")
        #expect(setup.apple.revokedTokens == [token])
    }

    /// The revocation's statement began before the sign-in did (it waited
    /// for another user of its batch first), so the job's creation time is
    /// older than the token: the sign-out still covers it, its moment being
    /// taken once the user's row is locked.
    @Test func aRevocationThatBeganBeforeTheSignInStillCoversItsToken() async throws {
        let db = try await TestDatabase.create()
        try await db.execute("""
            INSERT INTO siwa.users (apple_sub, status, status_event_time, apple_team) VALUES ('a.other', 'active', NULL, 'TEAM123456'), ('b.target', 'active', 1000, 'TEAM123456')
            """)
        let outcomes = try await OpenConnection.with(db.serveConfiguration) { other in
        try await OpenConnection.with(db.serveConfiguration) { signIn in
        try await OpenConnection.with(db.serveConfiguration) { inbox in
            try await other.run("BEGIN")
            try await other.run("SELECT FROM siwa.users WHERE apple_sub = 'a.other' FOR UPDATE")
            let batch = Task {
                try await inbox.record([InboxBatchTests.entry("n-other", sub: "a.other", at: 1, UserEffect(emailForwardingEnabled: true)),
                                        Self.revocation("n-revoked", sub: "b.target", at: 2000)])
            }
            #expect(try await eventually(upTo: .seconds(20)) { try await Self.lockWaiters(db) == 1 })
            // The sign-in begins after the batch's statement, and takes the target first.
            try await signIn.run("BEGIN")
            try await signIn.run("SELECT FROM siwa.users WHERE apple_sub = 'b.target' FOR UPDATE")
            try await Self.signIn("b.target", client: "app", iat: 1500, on: signIn)
            try await other.run("COMMIT")
            #expect(try await eventually(upTo: .seconds(20)) { try await Self.lockWaiters(db) == 1 })
            try await signIn.run("COMMIT")
            return try await batch.value
        }
        }
        }
        #expect(outcomes.allSatisfy { $0 != .duplicate })
        #expect(try await db.strings("SELECT status FROM siwa.users WHERE apple_sub = 'b.target'") == ["consent_revoked"])
        #expect(try await Self.signOut(db, sub: "b.target")?.clients == ["app"])
    }

    /// A sign-in that queued for the row behind the revocation (its
    /// transaction began first) comes after it: its token is kept.
    @Test func aSignInQueuedBehindTheRevocationKeepsItsToken() async throws {
        let db = try await TestDatabase.create()
        try await db.execute("INSERT INTO siwa.users (apple_sub, status, status_event_time, apple_team) VALUES ('kept', 'active', 1000, 'TEAM123456')")
        try await OpenConnection.with(db.serveConfiguration) { early in
            try await Self.signIn("kept", client: "app", iat: 1000, on: early)
        }
        try await OpenConnection.with(db.serveConfiguration) { signIn in
        try await OpenConnection.with(db.serveConfiguration) { inbox in
            try await signIn.run("BEGIN")
            try await signIn.run("SELECT now()")
            try await inbox.run("BEGIN")
            _ = try await inbox.record([Self.revocation("n-1", sub: "kept", at: 2000)])
            let waiting = Task {
                try await signIn.run("SELECT FROM siwa.users WHERE apple_sub = 'kept' FOR UPDATE")
                try await Self.signIn("kept", client: "web", iat: 3000, on: signIn)
                try await signIn.run("COMMIT")
            }
            #expect(try await eventually(upTo: .seconds(20)) { try await Self.lockWaiters(db) == 1 })
            try await inbox.run("COMMIT")
            try await waiting.value
        }
        }
        #expect(try await db.strings("SELECT status FROM siwa.users WHERE apple_sub = 'kept'") == ["active"])
        #expect(try await Self.signOut(db, sub: "kept")?.clients == ["app"], "the web token came after the revocation")
    }

    /// A second revocation, after a sign-in that followed the first one,
    /// while the first sign-out is pending: the sign-out covers the new
    /// token too. While it runs: a sign-out follows it.
    @Test func aSecondRevocationCoversTheTokensOfTheSignInBetween() async throws {
        let db = try await TestDatabase.create()
        try await db.execute("INSERT INTO siwa.users (apple_sub, status, status_event_time, apple_team) VALUES ('twice', 'active', 1000, 'TEAM123456')")
        try await OpenConnection.with(db.serveConfiguration) { connection in
            try await Self.signIn("twice", client: "app", iat: 1000, on: connection)
            _ = try await connection.record([Self.revocation("r-1", sub: "twice", at: 2000)])
            try await Self.signIn("twice", client: "web", iat: 3000, on: connection)
            #expect(try await Self.signOut(db, sub: "twice")?.clients == ["app"])
            _ = try await connection.record([Self.revocation("r-2", sub: "twice", at: 4000)])
        }
        let pending = try #require(try await Self.signOut(db, sub: "twice"))
        #expect(pending.clients == ["app", "web"])
        #expect(try await db.scalar("SELECT count(*) FROM siwa.jobs") == 1)

        // Running (claimed): a later sign-in's token waits for the sign-out that follows it.
        try await db.execute("UPDATE siwa.jobs SET state = 'running'")
        try await OpenConnection.with(db.serveConfiguration) { connection in
            try await Self.signIn("twice", client: "mac", iat: 5000, on: connection)
            _ = try await connection.record([Self.revocation("r-3", sub: "twice", at: 6000)])
        }
        try await db.execute("UPDATE siwa.jobs SET state = 'completed' WHERE id = \(pending.job)")
        let next = try #require(try await Self.signOut(db, sub: "twice"))
        #expect(next.job != pending.job)
        #expect(next.clients == ["app", "mac", "web"])
        #expect(try await db.strings("SELECT args->>'jti' || '/' || (args->>'rerun_of') FROM siwa.jobs WHERE id = \(next.job)")
                == ["r-3/\(pending.job)"])
    }

    /// A user siwa never saw signs in for the first time while an older
    /// `consent-revoked` is recorded: the revocation finds no row to lock,
    /// waits for the sign-in's insert, and is stale after all: no purge,
    /// no sign-out.
    @Test func anOlderRevocationRacingAFirstSignInChangesNothing() async throws {
        let db = try await TestDatabase.create()
        let outcomes = try await OpenConnection.with(db.serveConfiguration) { signIn in
        try await OpenConnection.with(db.serveConfiguration) { inbox in
            try await signIn.run("BEGIN")
            try await signIn.run("INSERT INTO siwa.users (apple_sub, status, status_event_time, apple_team) VALUES ('newcomer', 'active', 2000, 'TEAM123456')")
            try await Self.signIn("newcomer", client: "app", iat: 2000, on: signIn)
            let batch = Task {
                try await inbox.record([Self.revocation("old-purge", sub: "newcomer", at: 1000, purge: true)])
            }
            #expect(try await eventually(upTo: .seconds(20)) { try await Self.lockWaiters(db) == 1 })
            try await signIn.run("COMMIT")
            return try await batch.value
        }
        }
        #expect(outcomes.first.map { $0 != .duplicate } == true)
        #expect(try await db.strings("SELECT status FROM siwa.users WHERE apple_sub = 'newcomer'") == ["active"])
        #expect(try await db.scalar("SELECT count(*) FROM siwa.jobs") == 0)
        #expect(try await db.strings("""
            SELECT (details->>'purge') || '/' || (details->>'older_than_sign_in') FROM siwa.audit_log
            WHERE action = 'notification.recorded'
            """) == ["false/true"])
    }
}
