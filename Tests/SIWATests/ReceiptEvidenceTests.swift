import AccountLifecycle
import AccountStore
import AppleSignIn
import Foundation
import Testing

/// A deletion receipt says only what the audit trail shows: a purge whose
/// `steps_done` claims steps with no `job.step_completed` row by the
/// worker's role is not completed but discarded (audit row
/// `job.completion_refused`, the attention list), and gets no receipt.
@Suite("Receipt evidence", .testDatabases, .timeLimit(.minutes(10)))
struct ReceiptEvidenceTests {
    @Test func stepsDoneForgedByTheOwnerYieldNoReceiptAndADiscardedJob() async throws {
        let keys = try await ReceiptFixture.make()
        let harness = try await WorkerHarness.start(settings: keys.workerSettings)
        try atTestEnd { await harness.stop(); keys.remove() }
        let database = harness.database
        let forged = "evidence.forged", honest = "evidence.honest"
        try await harness.enqueue(subs: [forged, honest])
        // The owner (siwa_admin can no longer) marks the plan's steps done:
        // the app's rows and the downstream were never touched.
        try await database.execute("""
            UPDATE siwa.jobs SET steps_done = jsonb_build_object('\(WorkerHarness.sqlStep)', now(), '\(WorkerHarness.httpStep)', now())
            WHERE args->>'apple_sub' = '\(forged)'
            """)
        let worker = try harness.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await harness.wait {
            let done = try await harness.count(state: "completed")
            let discarded = try await harness.count(state: "discarded")
            return done == 1 && discarded == 1
        }, "\(worker.log.suffix(3000))")
        #expect(await worker.terminate() == 0)

        #expect(try await database.strings("SELECT args->>'apple_sub' FROM siwa.jobs WHERE state = 'discarded'") == [forged])
        #expect(try await ReceiptFixture.receipts(in: database, sub: forged).isEmpty)
        #expect(worker.log.contains("Job completion refused"), "\(worker.log.suffix(3000))")
        // The trail says why, naming the steps without evidence; nothing was erased.
        #expect(try await database.strings("""
            SELECT action || ' ' || coalesce(details->>'steps_without_evidence', details->>'error') FROM siwa.audit_log
            WHERE apple_sub = '\(forged)' AND action IN ('job.completion_refused', 'job.discarded', 'job.completed', 'receipt.issued')
            ORDER BY seq
            """) == [
                #"job.completion_refused ["\#(WorkerHarness.sqlStep)", "\#(WorkerHarness.httpStep)"]"#,
                "job.discarded completion refused: no job.step_completed audit row by the worker's role for "
                    + "\(WorkerHarness.sqlStep), \(WorkerHarness.httpStep)",
            ])
        #expect(try await database.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = '\(forged)' AND email IS NOT NULL") == 1)
        #expect(try await database.scalar("SELECT count(*) FROM app.profiles WHERE apple_sub = '\(forged)'") == 1)
        // It alerts as any discarded purge does.
        let attention = try await database.strings("SELECT apple_sub || ' ' || last_error FROM siwa.attention")
        #expect(attention.count == 1 && attention[0].hasPrefix("\(forged) ") && attention[0].contains("completion refused"), "\(attention)")

        // The honest purge's receipt lists each step the worker recorded.
        let receipt = try #require(try await ReceiptFixture.receipts(in: database, sub: honest).first)
        let (claims, _) = try DeletionReceipt.verify(receipt, keys: try ES256KeySet.load(path: keys.jwksFile))
        #expect(claims.purge.steps.map(\.name) == [PurgePlan.builtInStepName, WorkerHarness.sqlStep, WorkerHarness.httpStep])
        #expect(try await database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE apple_sub = '\(honest)' AND action = 'job.step_completed'
              AND db_user = '\(TestDatabase.workerRole)'
            """) == 3)
    }
}
