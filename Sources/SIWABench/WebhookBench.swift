import AccountStore
import AppleSimulator
import Foundation
import Logging
import PostgresNIO

/// The app events webhook's part of `make bench` (`BENCH_ONLY=webhook`):
/// - the ingest, warm database, with the webhook off, with deliveries
///   enqueued but not delivered (the enqueue's cost alone), and on: the
///   record statement enqueues a delivery per notification and the release
///   `siwa worker` delivers them to a receiver in this process while the
///   load runs; the pgbench ceiling runs the same statement with the switch
///   on, so the ratio (target >= 1.0) compares like with like;
/// - burn-down: `deliveries` waiting in the queue (one per user, from audit
///   rows the trigger turned into deliveries), deliveries/s from the
///   worker's start until the last is completed, and its CPU per delivery.
enum WebhookBench {
    /// The app's backend on loopback: answers 204, counts, keeps nothing.
    struct Receiver {
        let receiver: AppEventReceiver
        let server: RunningServer
        let secret: String

        static func start(logger: Logger) async throws -> Receiver {
            let receiver = AppEventReceiver(recording: false)
            let server = try await receiver.start(logger: logger)
            let key = (0..<32).map { _ in UInt8.random(in: 0...255) }
            return Receiver(receiver: receiver, server: server, secret: "whsec_" + Data(key).base64EncodedString())
        }

        var settings: [String: String] {
            ["SIWA_APP_WEBHOOK_URL": server.baseURL + AppEventReceiver.path, "SIWA_APP_WEBHOOK_SECRET": secret]
        }

        func stop() async { await server.stop() }
    }

    static func scenarios(_ hook: Receiver) -> [IngestScenario] {
        [
            IngestScenario(label: "hookoff", title: "warm database (ANALYZE after the warm-up), app webhook off", analyzeAfterWarmUp: true),
            IngestScenario(label: "hookqueue", title: "the same, deliveries enqueued (one per notification) but not delivered: the enqueue's cost",
                           analyzeAfterWarmUp: true, enqueueOnly: true),
            IngestScenario(label: "hookon", title: "the same, app webhook on: a delivery per notification, delivered while the load runs",
                           analyzeAfterWarmUp: true, workerSettings: hook.settings),
        ]
    }

    static func printIngestCost(_ reports: [IngestReport]) {
        guard let off = reports.first(where: { $0.scenario.label == "hookoff" }),
              let on = reports.first(where: { $0.scenario.label == "hookon" }) else { return }
        say("")
        say("== app events webhook: its cost to the ingest (same run, same machine)")
        if let queued = reports.first(where: { $0.scenario.label == "hookqueue" }) {
            say(String(format: "enqueue only (none delivered)  committed/s %.0f (%.2f of off), ceiling %.0f tps (%.2f of off), ratio %.2f (rounds: %@)",
                       median(queued.siwaRates), median(queued.siwaRates) / median(off.siwaRates), median(queued.pgbenchRates),
                       median(queued.pgbenchRates) / median(off.pgbenchRates), median(queued.ratios),
                       queued.ratios.map { String(format: "%.2f", $0) }.joined(separator: ", ")))
        }
        say(String(format: "committed/s, webhook on       %.0f   (%.2f of the %.0f with it off)", median(on.siwaRates),
                   median(on.siwaRates) / median(off.siwaRates), median(off.siwaRates)))
        say(String(format: "pgbench ceiling, webhook on   %.0f tps   (%.2f of the %.0f with it off)", median(on.pgbenchRates),
                   median(on.pgbenchRates) / median(off.pgbenchRates), median(off.pgbenchRates)))
        say(String(format: "ingest ratio, webhook on      %.2f   (target >= 1.0; rounds: %@; off: %.2f)", median(on.ratios),
                   on.ratios.map { String(format: "%.2f", $0) }.joined(separator: ", "), median(off.ratios)))
        if let deliveries = on.deliveries {
            say("deliveries by the end         \(deliveries.completed) of \(deliveries.enqueued) enqueued (siwa's and pgbench's notifications) completed")
        }
    }

    struct BurnDown {
        var deliveries = 0
        var concurrency = 0
        var rates: [Double] = []
        /// The worker's CPU (user + system, from its start) per delivery, µs.
        var cpu: [Double] = []
        var received = 0
    }

    static func burnDown(serverURL: String, hook: Receiver, deliveries: Int, concurrency: Int, rounds: Int) async throws -> BurnDown {
        let database = try await BenchDatabase.create(serverURL: serverURL, label: "hookburn")
        do {
            let report = try await DatabaseConfiguration(url: database.ownerURL, maximumConnections: 2).withClient { client in
                try await burnDown(database: database, client: client, hook: hook, deliveries: deliveries, concurrency: concurrency,
                                   rounds: rounds)
            }
            await database.drop()
            return report
        } catch {
            await database.drop()
            throw error
        }
    }

    private static func burnDown(database: BenchDatabase, client: PostgresClient, hook: Receiver, deliveries: Int,
                                 concurrency: Int, rounds: Int) async throws -> BurnDown {
        let logger = Logger(label: "siwa-bench.webhook")
        var report = BurnDown(deliveries: deliveries, concurrency: concurrency)
        let receivedBefore = hook.receiver.received
        for round in 1...rounds {
            // One sign-in audit row per user: the audit trigger (sql/014)
            // enqueues a delivery for each, as for a real sign-in.
            try await client.query("TRUNCATE siwa.jobs", logger: logger)
            try await client.query("UPDATE siwa.app_webhook SET enabled = true", logger: logger)
            try await client.query("""
                INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
                SELECT 'bench', 'user.signed_in', 'hook' || \(round) || '.' || i, \(SignInCredentials.teamID)::text,
                       jsonb_build_object('user_id', i, 'is_new_user', true, 'client_id', 'com.example.siwa.bench',
                                          'refresh_token_stored', false)
                FROM generate_series(1, \(deliveries)) AS i
                """, logger: logger)
            try await client.query("ANALYZE siwa.jobs", logger: logger)
            let start = ContinuousClock.now
            let worker = try WorkerProcess.start(databaseURL: database.workerURL, settings: hook.settings.merging([
                "SIWA_WORKER_CONCURRENCY": String(concurrency), "SIWA_WORKER_POLL_SECONDS": "1",
            ]) { $1 })
            let deadline = start + .seconds(600)
            while try await completed(client, logger: logger) < deliveries {
                guard ContinuousClock.now < deadline, worker.process.isRunning else {
                    _ = await worker.stop()
                    throw BenchError("the deliveries did not complete (worker log: \(worker.logFile))")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            let elapsed = ContinuousClock.now - start
            let seconds = elapsed / .seconds(1)
            let cpu = worker.cpuSeconds / Double(deliveries) * 1e6
            _ = await worker.stop()
            report.rates.append(Double(deliveries) / seconds)
            report.cpu.append(cpu)
            say(String(format: "webhook round %d: %d deliveries in %.2f s: %.0f/s, worker %.0f µs CPU each", round, deliveries, seconds,
                       Double(deliveries) / seconds, cpu))
        }
        report.received = hook.receiver.received - receivedBefore
        return report
    }

    static func completed(_ client: PostgresClient, logger: Logger) async throws -> Int {
        let rows = try await client.query("SELECT count(*) FROM siwa.jobs WHERE kind = 'app_event' AND state = 'completed'", logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    static func print(_ report: BurnDown) {
        say("")
        say("== app events webhook: deliveries to a loopback receiver (release `siwa worker`, concurrency \(report.concurrency), one user each, signed, 204 answers)")
        say(String(format: "burn-down of %d deliveries   median %.0f/s   (rounds: %@)   worker CPU %.0f µs each   %d received",
                   report.deliveries, median(report.rates), report.rates.map { String(format: "%.0f", $0) }.joined(separator: ", "),
                   median(report.cpu), report.received))
    }
}
