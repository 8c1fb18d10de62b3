import AccountStore
import Foundation
import PostgresNIO
import Testing

/// The guarded path every siwa statement takes (GuardedConnection.swift):
/// a transaction abandoned half-way never goes back to the pool open, and
/// a connection whose server session died is replaced, not reused.
@Suite("Guarded connections", .testDatabases, .timeLimit(.minutes(5)))
struct GuardedConnectionTests {
    /// One connection in the pool: a transaction cancelled in the middle of
    /// a statement (its INSERT done, a sleep running) is closed, not handed
    /// to the next caller with the INSERT still pending in it.
    @Test func aCancelledTransactionNeverReachesTheNextCaller() async throws {
        let database = try await TestDatabase.create()
        var configuration = try database.runtimeConfiguration
        configuration.maximumConnections = 1
        try await TestDatabase.withClient(configuration) { client in
            let abandoned = Task {
                try await client.withGuardedTransaction(logger: TestEnvironment.logger) { connection in
                    try await connection.query("INSERT INTO siwa.audit_log (actor, action) VALUES ('test', 'test.abandoned')",
                                               logger: TestEnvironment.logger)
                    try await connection.query("SELECT pg_sleep(30)", logger: TestEnvironment.logger)
                }
            }
            // Cancelled once the sleep runs, its INSERT done before it.
            #expect(try await eventually(upTo: .seconds(30)) {
                try await database.superuserScalar("""
                    SELECT count(*) FROM pg_stat_activity
                    WHERE datname = current_database() AND state = 'active' AND query = 'SELECT pg_sleep(30)'
                    """) == 1
            })
            let started = ContinuousClock.now
            abandoned.cancel()
            await #expect(throws: (any Error).self) { try await abandoned.value }
            // The pool's only connection is the next caller's: in no
            // transaction, and the abandoned INSERT is not there.
            // (The abandoned transaction had an id: its INSERT took one.)
            let rows = try await client.guardedQuery("SELECT pg_current_xact_id_if_assigned() IS NULL",
                                                     logger: TestEnvironment.logger)
            #expect(try #require(rows.first).decode(Bool.self), "a clean session, not the abandoned transaction")
            #expect(ContinuousClock.now - started < .seconds(10), "the cancel did not wait for the 30 s sleep")
        }
        #expect(try await database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'test.abandoned'") == 0)
    }

    /// The server ends the session under an open transaction: the call
    /// fails (ConnectionClosed or the server's error), nothing it did is
    /// kept, and the same one-connection pool is soon working again.
    @Test func aSessionKilledMidTransactionIsReplaced() async throws {
        let database = try await TestDatabase.create()
        var configuration = try database.runtimeConfiguration
        configuration.maximumConnections = 1
        try await TestDatabase.withClient(configuration) { client in
            let killed = Task {
                try await client.withGuardedTransaction(logger: TestEnvironment.logger) { connection in
                    try await connection.query("INSERT INTO siwa.audit_log (actor, action) VALUES ('test', 'test.killed')",
                                               logger: TestEnvironment.logger)
                    try await connection.query("SELECT pg_sleep(30)", logger: TestEnvironment.logger)
                }
            }
            #expect(try await eventually(upTo: .seconds(10)) {
                try await database.superuserScalar("""
                    SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                    WHERE datname = current_database() AND query = 'SELECT pg_sleep(30)'
                    """) == 1
            })
            await #expect(throws: (any Error).self) { try await killed.value }
            // The pool may lend the dead connection once more before it has
            // seen it close: that call fails at once (ConnectionClosed), it
            // does not hang; the next one gets a new session.
            var attempts = 0, answered = false
            while !answered, attempts < 3 {
                attempts += 1
                let started = ContinuousClock.now
                do {
                    let rows = try await client.guardedQuery("SELECT 1", logger: TestEnvironment.logger)
                    answered = try rows.first?.decode(Int.self) == 1
                } catch is ConnectionClosed {
                    #expect(ContinuousClock.now - started < .seconds(5), "a dead connection fails fast")
                }
            }
            #expect(answered, "a working session within \(attempts) calls")
        }
        #expect(try await database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'test.killed'") == 0)
    }
}
