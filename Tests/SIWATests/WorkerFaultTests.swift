import Foundation
import Testing

/// The worker when things die. In the serialized "Faults" suite: the
/// database-restart test stops the shared fault cluster.
extension FaultTests {
    /// kill -9 of the worker in the middle of 500 jobs with a slow step:
    /// after a restart every job completes, none is left running, every SQL
    /// step took effect once, and the downstream saw each job's step at
    /// least once, always under the same webhook-id.
    @Test func workerKillNineMidwayLosesNothing() async throws {
        let harness = try await WorkerHarness.start(slowSQL: 0.02, settings: ["SIWA_WORKER_CONCURRENCY": "8"])
        try atTestEnd { await harness.stop() }
        let subs = (0..<500).map { "k9w.\($0)" }
        try await harness.enqueue(subs: subs)
        let first = try harness.startWorker()
        try await harness.wait(upTo: .seconds(120)) { try await harness.count(state: "completed") >= 100 }
        await first.kill9()
        // A statement the dead worker's sessions had under way still ends
        // (a COMMIT received is kept): count the running jobs only once
        // those sessions are gone, or a job counted running may complete.
        #expect(try await harness.wait(upTo: .seconds(30)) { try await harness.workerSessions() == 0 })
        let runningAtKill = try await harness.count(state: "running")
        let completedAtKill = try await harness.count(state: "completed")
        #expect(runningAtKill > 0, "the kill should land mid-job")
        #expect(completedAtKill < subs.count, "the kill should land mid-queue")

        let second = try harness.startWorker()
        let done = try await harness.wait(upTo: .seconds(180)) { try await harness.count(state: "completed") == subs.count }
        #expect(done, "\(second.log.suffix(3000))")
        let db = harness.database
        #expect(try await harness.count(state: "running") == 0)
        // Exactly once for the SQL step on siwa's database.
        #expect(try await db.scalar("SELECT count(*) FROM app.purge_log") == subs.count)
        #expect(try await db.scalar("SELECT count(DISTINCT apple_sub) FROM app.purge_log") == subs.count)
        #expect(try await db.scalar("SELECT count(*) FROM app.profiles") == 0)
        // At least once, under one stable id per job, for the webhook.
        let deliveries = harness.downstream.deliveries.filter(\.accepted)
        var idsByJob: [Int: Set<String>] = [:]
        for delivery in deliveries {
            idsByJob[delivery.fields["job_id"] as? Int ?? -1, default: []].insert(delivery.webhookID)
        }
        #expect(idsByJob.count == subs.count)
        #expect(idsByJob.allSatisfy { job, ids in ids == ["siwa-job-\(job)-\(WorkerHarness.httpStep)"] })
        // The interrupted jobs were rescued, and the trail says so.
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'job.rescued'") >= runningAtKill)
        #expect(await second.terminate() == 0)
    }

    /// PostgreSQL restarted while the worker runs: it recovers by itself and
    /// finishes the jobs. Meanwhile its /readyz says the database is
    /// unreachable (503), and /metrics still answers, with
    /// siwa_database_reachable 0.
    @Test func workerRecoversFromDatabaseRestart() async throws {
        let database = try await TestDatabase.create(serverURL: try TestEnvironment.faultDatabaseURL)
        let harness = try await WorkerHarness.start(database: database, slowSQL: 0.05, settings: ["SIWA_WORKER_CONCURRENCY": "4"])
        try atTestEnd { await harness.stop() }
        let subs = (0..<200).map { "pgr.\($0)" }
        try await harness.enqueue(subs: subs)
        let port = try freePort()
        let worker = try harness.startWorker(["SIWA_WORKER_METRICS_PORT": String(port)])
        let readyz = "http://127.0.0.1:\(port)/readyz"
        try await harness.wait(upTo: .seconds(60)) { try await harness.count(state: "completed") >= 20 }
        #expect(try await HTTPAnswer.send(method: .GET, url: readyz, body: nil, headers: []).status == 200)
        try await pgScript("stop", "fault")
        let notReady = try await eventually(upTo: .seconds(10)) {
            let answer = try await HTTPAnswer.send(method: .GET, url: readyz, body: nil, headers: [], timeout: .seconds(5))
            return answer.status == 503 && String(decoding: answer.body, as: UTF8.self) == #"{"status":"not_ready","database":"unreachable"}"#
        }
        #expect(notReady)
        #expect(try await PrometheusText.scrape("http://127.0.0.1:\(port)").value("siwa_database_reachable") == 0)
        try await pgScript("start", "fault")
        #expect(try await eventually(upTo: .seconds(30)) {
            try await HTTPAnswer.send(method: .GET, url: readyz, body: nil, headers: [], timeout: .seconds(5)).status == 200
        })
        let done = try await harness.wait(upTo: .seconds(120)) { try await harness.count(state: "completed") == subs.count }
        #expect(done, "\(worker.log.suffix(3000))")
        #expect(try await harness.count(state: "running") == 0)
        #expect(try await database.scalar("SELECT count(DISTINCT apple_sub) FROM app.purge_log") == subs.count)
        #expect(try await database.scalar("SELECT count(*) FROM app.purge_log") == subs.count)
        #expect(worker.child.isRunning)
        #expect(await worker.terminate() == 0)
    }
}
