import AccountStore
import Foundation
import Logging
import PostgresNIO
import Testing

/// A purge completes only with its receipt: they are written in one
/// transaction, so a failure or a crash between the last step and the
/// completion leaves neither, and the rerun leaves both.
@Suite("Deletion receipt durability", .testDatabases, .timeLimit(.minutes(10)))
struct ReceiptDurabilityTests {
    /// The receipt's INSERT fails (a trigger the test adds as the owner):
    /// the erase and the completion roll back with it, and the job is
    /// retried; once the insert works, the purge completes with one receipt.
    @Test func aReceiptThatCannotBeStoredLeavesThePurgeIncomplete() async throws {
        let keys = try await ReceiptFixture.make()
        let harness = try await WorkerHarness.start(planSteps: { _ in [] }, settings: keys.workerSettings)
        try atTestEnd { await harness.stop(); keys.remove() }
        try await harness.database.execute("""
            CREATE FUNCTION siwa.test_refuse_receipt() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'test: receipts refused'; END $$;
            CREATE TRIGGER test_refuse_receipt BEFORE INSERT ON siwa.deletion_receipts
                FOR EACH ROW EXECUTE FUNCTION siwa.test_refuse_receipt();
            """)
        let sub = "011.refused.0001"
        try await harness.enqueue(subs: [sub])
        let worker = try harness.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await harness.wait { try await harness.database.scalar("SELECT max(attempt) FROM siwa.jobs") >= 2 }, "\(worker.log)")
        #expect(try await harness.database.scalar("SELECT count(*) FROM siwa.jobs WHERE state = 'completed' OR steps_done <> '{}'") == 0)
        #expect(try await harness.database.scalar(
            "SELECT count(*) FROM siwa.users WHERE apple_sub = '\(sub)' AND email IS NOT NULL AND purged_at IS NULL") == 1,
                "the erase rolled back with the receipt")
        #expect(try await harness.database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'job.completed'") == 0)

        try await harness.database.execute("DROP TRIGGER test_refuse_receipt ON siwa.deletion_receipts")
        #expect(try await harness.wait { try await harness.count(state: "completed") == 1 }, "\(worker.log)")
        #expect(try await ReceiptFixture.receipts(in: harness.database, sub: sub).count == 1)
    }

    /// As the audit trail: the runtime role may insert and read receipts,
    /// and nobody, the owner included, may change or remove one.
    @Test func receiptsAreAppendOnly() async throws {
        let database = try await TestDatabase.create()
        try await database.execute("""
            INSERT INTO siwa.deletion_receipts (job_id, apple_sub, jti, key_id, receipt) VALUES (1, 'sub.1', 'j1', 'k', 'a.b.c')
            """)
        let runtime = try database.workerConfiguration
        #expect(try await LeastPrivilegeTests.sqlState(of: """
            INSERT INTO siwa.deletion_receipts (job_id, apple_sub, jti, key_id, receipt) VALUES (2, 'sub.2', 'j2', 'k', 'a.b.c') RETURNING id
            """, on: runtime) == nil)
        #expect(try await LeastPrivilegeTests.sqlState(of: "SELECT receipt FROM siwa.deletion_receipts", on: runtime) == nil)
        for statement in ["UPDATE siwa.deletion_receipts SET receipt = 'x.y.z'", "DELETE FROM siwa.deletion_receipts",
                          "TRUNCATE siwa.deletion_receipts"] {
            #expect(try await LeastPrivilegeTests.sqlState(of: statement, on: runtime) == "42501", "runtime: \(statement)")
            #expect(try await LeastPrivilegeTests.sqlState(of: statement, on: database.configuration) == "42501", "owner: \(statement)")
        }
        #expect(try await LeastPrivilegeTests.sqlState(of: """
            INSERT INTO siwa.deletion_receipts (job_id, apple_sub, jti, key_id, receipt) VALUES (3, 's', 'j3', 'k', 'not a jws')
            """, on: runtime) == "23514", "only a compact JWS")
    }

    /// kill -9 while the worker is inside the transaction that records the
    /// last step (an HTTP step, delivered) and completes the job: held there
    /// by a lock the test owns, the receipt's INSERT waits. After the kill
    /// nothing of that transaction is left: no completion, no receipt. The
    /// next worker rescues the job, delivers again (at least once) and
    /// completes it with exactly one receipt.
    @Test func aWorkerKilledBeforeTheCompletionCommitsLeavesNoHalfPurge() async throws {
        let keys = try await ReceiptFixture.make()
        let harness = try await WorkerHarness.start(settings: keys.workerSettings)
        try atTestEnd { await harness.stop(); keys.remove() }
        let lock = 1_100_011
        // This test's lock in this database only: pg_locks shows the whole
        // cluster, where other tests' workers take advisory locks each second.
        let held = "locktype = 'advisory' AND objid = \(lock) AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        try await harness.database.execute("""
            CREATE FUNCTION siwa.test_hold_receipt() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_advisory_xact_lock(\(lock)); RETURN NEW; END $$;
            CREATE TRIGGER test_hold_receipt BEFORE INSERT ON siwa.deletion_receipts
                FOR EACH ROW EXECUTE FUNCTION siwa.test_hold_receipt();
            """)
        let sub = "011.kill.0001"
        try await harness.enqueue(subs: [sub])
        try await harness.database.withClient { client in
            try await client.withConnection { holder in
                try await holder.query("SELECT pg_advisory_lock(\(lock))", logger: TestEnvironment.logger)
                let first = try harness.startWorker()
                #expect(try await harness.wait(upTo: .seconds(30)) {
                    try await harness.database.scalar("SELECT count(*) FROM pg_locks WHERE \(held) AND NOT granted") == 1
                }, "\(first.log)")
                #expect(harness.downstream.deliveries.count == 1, "the last step was done")
                await first.kill9()
                // The dead worker's server process finishes the INSERT once
                // the lock is free, finds its client gone, and rolls back.
                try await holder.query("SELECT pg_advisory_unlock(\(lock))", logger: TestEnvironment.logger)
            }
        }
        #expect(try await harness.wait(upTo: .seconds(30)) {
            try await harness.database.scalar("SELECT count(*) FROM pg_locks WHERE \(held)") == 0
        })
        #expect(try await harness.database.strings("SELECT state FROM siwa.jobs") == ["running"])
        #expect(try await harness.database.scalar("SELECT count(*) FROM siwa.jobs WHERE steps_done ? '\(WorkerHarness.httpStep)'") == 0)
        #expect(try await harness.database.scalar("SELECT count(*) FROM siwa.deletion_receipts") == 0)

        let second = try harness.startWorker()
        try atTestEnd { await second.kill9() }
        #expect(try await harness.wait { try await harness.count(state: "completed") == 1 }, "\(second.log)")
        #expect(harness.downstream.deliveries.count == 2, "delivered again after the rescue")
        #expect(try await ReceiptFixture.receipts(in: harness.database, sub: sub).count == 1)
        #expect(try await harness.database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'receipt.issued'") == 1)
    }
}
