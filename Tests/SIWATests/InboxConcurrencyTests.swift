import AccountStore
import Foundation
import Logging
import PostgresNIO
import Testing

/// The inbox under concurrency, with the interleavings driven by hand on
/// real connections: a deletion committing under an email event, and two
/// transactions recording the same notification.
@Suite("Inbox concurrency", .testDatabases)
struct InboxConcurrencyTests {
    /// An email event whose statement began before a concurrent deletion
    /// (and its erase) committed must not leave the address behind.
    @Test func anEmailRacingADeletionIsNotKept() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        let db = siwa.database
        let sub = "race.\(UUID().uuidString)"
        try await db.execute("INSERT INTO siwa.users (apple_sub, email, apple_team) VALUES ('\(sub)', 'before@privaterelay.appleid.com', 'TEAM123456')")

        // The deletion's transaction (the worker's erase, as its role) holds the user row...
        let post = try await OpenConnection.with(db.workerConfiguration) { deletion in
        try await deletion.run("BEGIN")
        try await deletion.run("SELECT FROM siwa.users WHERE apple_sub = '\(sub)' FOR UPDATE")
        // ...while the email event arrives and its statement starts.
        let email = "raced@privaterelay.appleid.com"
        let post = Task { try await siwa.post(token: siwa.notification("email-enabled", sub: sub, email: email)) }
        let blocked = try await eventually(upTo: .seconds(10)) { try await Self.waitingForALock(db) }
        #expect(blocked, "the email event never reached the user row")
        // The deletion commits with its erase.
        try await deletion.run("UPDATE siwa.users SET status = 'deleted', email = NULL WHERE apple_sub = '\(sub)'")
        try await deletion.run("UPDATE siwa.notifications SET claims = claims #- '{events,email}' WHERE apple_sub = '\(sub)'")
        try await deletion.run("COMMIT")
        return post
        }

        #expect(try await post.value.status == 200)
        #expect(try await db.scalar("SELECT count(*) FROM siwa.notifications WHERE apple_sub = '\(sub)'") == 1)
        #expect(try await db.scalar("SELECT count(*) FROM siwa.notifications WHERE claims::text LIKE '%@%'") == 0)
        #expect(try await db.strings("SELECT status || '/' || (email IS NULL)::text FROM siwa.users WHERE apple_sub = '\(sub)'")
                == ["deleted/true"])
    }

    /// Transaction A records two events of one user (two rounds); B records
    /// a redelivery of A's second event in between. B must wait for A, not
    /// hold the jti A needs while waiting for the user A holds (a deadlock).
    @Test func aRedeliveryBetweenTwoRoundsDoesNotDeadlock() async throws {
        let database = try await TestDatabase.create()
        try await database.execute("INSERT INTO siwa.users (apple_sub, apple_team) VALUES ('shared', 'TEAM123456')")
        let effect = UserEffect(emailForwardingEnabled: true)
        let first = InboxBatchTests.entry("j-first", sub: "shared", at: 1, effect)
        let second = InboxBatchTests.entry("j-second", sub: "shared", at: 2, effect)
        try await OpenConnection.with(database.serveConfiguration) { a in
        try await OpenConnection.with(database.serveConfiguration) { b in
        try await a.run("BEGIN")
        _ = try await a.record([first])
        try await b.run("BEGIN")
        let redelivery = Task { try await b.record([second]) }
        #expect(try await eventually(upTo: .seconds(10)) { try await Self.waitingForALock(database) })
        // A's second round; with B holding j-second this deadlocks (40P01 after deadlock_timeout).
        let outcome = try await a.record([second])
        try await a.run("COMMIT")
        #expect(outcome.first.map { $0 != .duplicate } == true)
        let redelivered = try await redelivery.value
        try await b.run("COMMIT")
        #expect(redelivered == [.duplicate])
        }
        }
        #expect(try await database.scalar("SELECT count(*) FROM siwa.notifications") == 2)
    }

    /// Many writers, the same users, every notification delivered twice at
    /// once: each recorded once, and no batch ever fails (a failed batch is
    /// how a deadlock shows: its entries are then retried one by one).
    @Test func redeliveriesAcrossWritersNeverFailABatch() async throws {
        let database = try await TestDatabase.create()
        let runner = try PostgresClientRunner(database.serveConfiguration)
        defer { runner.stop() }
        var options = InboxWriter.Options()
        options.lanes = 4
        options.maxBatch = 16
        // What is measured is failed batches, not speed: on a loaded machine
        // (the whole suite runs at once) 800 commits can take more than the
        // default 10 s wait.
        options.timeout = .seconds(120)
        let writer = InboxWriter(client: runner.client, options: options, logger: TestEnvironment.logger)
        let running = Task { await writer.run() }
        defer { writer.close(); running.cancel() }

        let entries = (0..<400).map { index in
            InboxBatchTests.entry("storm-\(index)", sub: "user-\(index % 40)", at: Int64(index),
                                  UserEffect(emailForwardingEnabled: index % 2 == 0))
        }
        let outcomes = try await withThrowingTaskGroup(of: InboxOutcome.self) { group in
            for entry in entries + entries.reversed() {
                group.addTask { try await writer.record(entry) }
            }
            return try await group.reduce(into: [InboxOutcome]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == .duplicate }.count == 400)
        #expect(writer.failedBatchCount == 0)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.notifications") == 400)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.users") == 40)
    }

    /// A session of this database waits for a lock. (pg_locks, joined for
    /// the database: pg_stat_activity hides other roles' waits from a role
    /// that is not a superuser, but not their pid and database.)
    static func waitingForALock(_ database: TestDatabase) async throws -> Bool {
        try await database.scalar("""
            SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
            WHERE NOT l.granted AND a.datname = current_database()
            """) > 0
    }
}

/// One connection of its own, for interleavings a pool would hide.
struct OpenConnection: Sendable {
    let connection: PostgresConnection

    /// `body` with a connection that is closed after it, however it ends.
    static func with<T: Sendable>(_ configuration: DatabaseConfiguration,
                                  _ body: (OpenConnection) async throws -> T) async throws -> T {
        let connection = try await PostgresConnection.connect(
            configuration: .init(host: configuration.host, port: configuration.port, username: configuration.username,
                                 password: configuration.password, database: configuration.database, tls: .disable),
            id: 1, logger: TestEnvironment.logger)
        do {
            let value = try await body(OpenConnection(connection: connection))
            try? await connection.close()
            return value
        } catch {
            try? await connection.close()
            throw error
        }
    }

    func run(_ sql: String) async throws {
        try await connection.query(PostgresQuery(unsafeSQL: sql), logger: TestEnvironment.logger)
    }

    func record(_ entries: [InboxEntry]) async throws -> [InboxOutcome] {
        try await InboxWriter.record(entries, on: connection, logger: TestEnvironment.logger)
    }
}
