import AppleSimulator
import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore

// `make bench`: siwa's committed notifications/s and latency over real HTTP,
// against the ceiling of pgbench running the same SQL, in the same run, on
// the same throwaway PostgreSQL. Signing happens before the clock starts.
// Then the worker's burn-down, and sign-in: sign-ins/s and siwa's CPU per
// sign-in beside its CPU per notification, and the worker's validation of
// stored refresh tokens with Apple's rate cap off and on.


/// A line on stdout now (print is block-buffered into a pipe).
func say(_ line: String = "") {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func setting(_ name: String, _ fallback: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
}

/// The bench cluster's owner URL (scripts/bench.sh passes it); each
/// scenario makes a database of its own there.
let serverURL = ProcessInfo.processInfo.environment["SIWA_BENCH_SERVER_URL"] ?? ""
/// One line on stderr and a failed exit.
func fail(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("siwa-bench: \(message)\n".utf8))
    exit(status)
}

guard !serverURL.isEmpty else { fail("SIWA_BENCH_SERVER_URL is required (make bench sets it)", status: 2) }
let rounds = setting("BENCH_ROUNDS", 3)
let perRound = setting("BENCH_NOTIFICATIONS", 10_000)
let concurrency = setting("BENCH_CONCURRENCY", 64)
let pgbenchSeconds = setting("BENCH_PGBENCH_SECONDS", 5)
let offeredRate = setting("BENCH_OFFERED_RATE", 1000)
let openLoopCount = offeredRate * setting("BENCH_OPEN_LOOP_SECONDS", 5)
let preloadUsers = setting("BENCH_PRELOAD_USERS", 1_000_000)
// BENCH_ONLY=ingest, worker, signin, signin-store or webhook (or a comma list) runs only those parts.
let allParts = ["ingest", "worker", "signin", "signin-store", "webhook"]
let parts = (ProcessInfo.processInfo.environment["BENCH_ONLY"] ?? "").split(separator: ",").map(String.init)
if let unknown = parts.first(where: { !allParts.contains($0) }) {
    fail("BENCH_ONLY: unknown part '\(unknown)' (parts: \(allParts.joined(separator: ", ")))", status: 2)
}
func runs(_ part: String) -> Bool { parts.isEmpty || parts.contains(part) }

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = .error
    return handler
}
let logger = Logger(label: "siwa-bench")

// What users meet, each on a database of its own with default settings:
// a fresh install (no ANALYZE, autovacuum not yet run), one a while later
// (ANALYZE after the warm-up, as autovacuum would have it), and a million
// users on file (not analysed either). Junk floods the analysed one while
// Apple's steady rate is measured.
let allScenarios = [
    IngestScenario(label: "fresh", title: "fresh database (no ANALYZE)"),
    IngestScenario(label: "analyzed", title: "warm database (ANALYZE after the warm-up), then a junk flood",
                   analyzeAfterWarmUp: true, junkFlood: true),
    IngestScenario(label: "million", title: "\(preloadUsers) users preloaded (no ANALYZE)", preloadUsers: preloadUsers),
]
// BENCH_SCENARIOS=analyzed (a comma list of labels) runs only those.
let scenarios = ProcessInfo.processInfo.environment["BENCH_SCENARIOS"].map { list in
    allScenarios.filter { list.split(separator: ",").map(String.init).contains($0.label) }
} ?? allScenarios

/// Runs ingest scenarios (each: warm-up, rounds under wrk against the
/// pgbench ceiling, the open loop) and returns their reports.
@MainActor
func ingestReports(_ scenarios: [IngestScenario]) async -> [IngestReport] {
    var reports: [IngestReport] = []
    // The open loop's client: enough connections that a slow answer never
    // makes the next send queue in the client. Outside the `do`, so that a
    // failed scenario reports its error instead of the client's deinit trap.
    var httpConfiguration = HTTPClient.Configuration()
    httpConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = concurrency
    let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration)
    do {
        // Apple stand-in (its JWKS endpoint); siwa serve runs per scenario in its own process.
        let apple = try AppleSimulator()
        let appleServer = try await apple.start(logger: logger)
        let clientID = "com.example.siwa.bench"

        // Floors, measured in the same run: bare routes (Hummingbird, and
        // SwiftNIO alone) on the same two cores under the same load, and the
        // verification siwa cannot skip.
        let floors = try await StackFloors.start(jwks: apple.jwksJSON, clientID: clientID, logger: logger)

        // Pre-sign everything (RSA signing is Apple's cost, not ours).
        say("signing notifications (not timed)…")
        let bodies = try await IngestBench.sign(apple: apple, clientID: clientID, warmUp: setting("BENCH_WARMUP", 5000), rounds: rounds, perRound: perRound,
                                                openLoop: openLoopCount)
        say("signed \(bodies.total); per scenario: warm-up, \(rounds) rounds of \(perRound) at \(concurrency) connections (wrk), open loop at \(offeredRate)/s")
        for scenario in scenarios {
            say("")
            say("-- \(scenario.label): \(scenario.title)")
            reports.append(try await IngestBench.run(
                scenario, serverURL: serverURL, bodies: bodies, clientID: clientID, jwksURL: appleServer.baseURL + "/auth/keys",
                floors: floors, http: http, concurrency: concurrency,
                pgbenchSeconds: pgbenchSeconds, offeredRate: offeredRate))
        }
        await appleServer.stop()
        await floors.stop()
    } catch {
        _ = try? await http.shutdown().get()
        fail(String(reflecting: error))
    }
    _ = try? await http.shutdown().get()
    return reports
}

if runs("ingest") {
    IngestSummary.print(await ingestReports(scenarios), concurrency: concurrency, offeredRate: offeredRate)
}

if runs("worker") {
    let jobs = setting("BENCH_JOBS", 50_000)
    let workerConcurrency = setting("BENCH_WORKER_CONCURRENCY", 16)
    let pgbenchClients = setting("BENCH_PGBENCH_JOB_CLIENTS", 16)
    say("")
    say("worker: \(rounds) rounds of burning down \(jobs) jobs (concurrency \(workerConcurrency)), pgbench ceiling with \(pgbenchClients) clients")
    let database = try await BenchDatabase.create(serverURL: serverURL, label: "worker")
    let report: WorkerBench.Report
    do {
        report = try await WorkerBench.run(database: database, rounds: rounds, jobs: jobs, concurrency: workerConcurrency,
                                           pgbenchClients: pgbenchClients, pgbenchSeconds: pgbenchSeconds,
                                           latencySamples: setting("BENCH_WAKE_SAMPLES", 200),
                                           receipts: setting("BENCH_RECEIPTS", 0) == 1, logger: logger)
    } catch {
        await database.drop()
        fail(String(reflecting: error))
    }
    await database.drop()
    let ratios = zip(report.burnDown, report.ceiling).map { $0 / $1 }
    let wake = report.wakeLatenciesMS.sorted()
    say("")
    say("== siwa worker benchmark (release build, \(ProcessInfo.processInfo.activeProcessorCount) cores, trivial plan: the built-in step)")
    say(String(format: "burn-down of %d jobs         median %.0f jobs/s   (rounds: %@; worker concurrency %d)", jobs, median(report.burnDown),
               report.burnDown.map { String(format: "%.0f", $0) }.joined(separator: ", "), workerConcurrency))
    say(String(format: "worker CPU per job           median %.0f µs   (siwa-bench's process: the in-process worker and the completion poll; rounds: %@)",
               median(report.burnDownCPU), report.burnDownCPU.map { String(format: "%.0f", $0) }.joined(separator: ", ")))
    say(String(format: "PostgreSQL CPU per job       median %.0f µs   (the plain loop's: %.0f µs)", median(report.burnDownPostgresCPU),
               median(report.plainPostgresCPU)))
    say(String(format: "ceiling: pgbench, same SQL   median %.0f jobs/s   (claim + step-and-complete, one job per transaction, %d clients)",
               median(report.ceiling), pgbenchClients))
    say(String(format: "ratio worker / ceiling       median %.2f   (target >= 0.8; rounds: %@)", median(ratios),
               ratios.map { String(format: "%.2f", $0) }.joined(separator: ", ")))
    let plainRatios = zip(report.burnDown, report.plain).map { $0 / $1 }
    say(String(format: "plain claim+complete         median %.0f jobs/s   (PlainVersion: claim one with SKIP LOCKED, complete it in the next transaction, %d clients)",
               median(report.plain), PlainVersion.workerClients))
    say(String(format: "ratio worker / plain         median %.2f   (target >= 1.0; rounds: %@)", median(plainRatios),
               plainRatios.map { String(format: "%.2f", $0) }.joined(separator: ", ")))
    if !report.burnDownWithReceipts.isEmpty {
        let shares = zip(report.burnDownWithReceipts, report.burnDown).map { $0 / $1 }
        say(String(format: "burn-down with receipts      median %.0f jobs/s   (%.2f of the burn-down without, median of rounds: %@)",
                   median(report.burnDownWithReceipts), median(shares), shares.map { String(format: "%.2f", $0) }.joined(separator: ", ")))
    }
    say(String(format: "NOTIFY wake-up to claim      p50 %.1f ms   p99 %.1f ms   max %.1f ms   (%d idle samples, polling at 30 s; target p99 < 100 ms)",
               wake[wake.count / 2], wake[min(wake.count - 1, Int(Double(wake.count) * 0.99))], wake.last ?? 0, wake.count))
}

if runs("signin") {
    let options = SignInBench.Options(
        rounds: rounds, perRound: setting("BENCH_SIGNINS", 2000), notificationsPerRound: setting("BENCH_SIGNIN_NOTIFICATIONS", 4000),
        warmUp: setting("BENCH_SIGNIN_WARMUP", 500), concurrency: concurrency, validations: setting("BENCH_VALIDATIONS", 2000),
        cap: setting("BENCH_VALIDATION_CAP", 20), capSeconds: setting("BENCH_VALIDATION_CAP_SECONDS", 5))
    say("")
    let http = HTTPClient(eventLoopGroupProvider: .singleton)
    let report: SignInBench.Report
    do {
        report = try await SignInBench.run(serverURL: serverURL, options: options, http: http, logger: logger)
    } catch {
        _ = try? await http.shutdown().get()
        fail(String(reflecting: error))
    }
    _ = try? await http.shutdown().get()
    SignInSummary.print(report, options: options)
}

if runs("signin-store") {
    // The sign-in store alone, batched against a transaction per sign-in (issue 20 §5).
    do {
        try await SignInStoreBench.run(serverURL: serverURL, concurrencies: [8, 64], rounds: rounds,
                                       perRound: setting("BENCH_STORE_SIGNINS", 4000), logger: logger)
    } catch {
        fail(String(reflecting: error))
    }
}

if runs("webhook") {
    // The app events webhook: the ingest with it on beside it off (the worker
    // delivering to a receiver in this process while the load runs), then
    // the deliveries' burn-down.
    let hook = try await WebhookBench.Receiver.start(logger: logger)
    say("")
    say("webhook: the ingest without and with the app events webhook (\(rounds) rounds each), then \(setting("BENCH_DELIVERIES", 20_000)) deliveries burnt down")
    let reports = await ingestReports(WebhookBench.scenarios(hook))
    IngestSummary.print(reports, concurrency: concurrency, offeredRate: offeredRate)
    WebhookBench.printIngestCost(reports)
    do {
        let burnDown = try await WebhookBench.burnDown(serverURL: serverURL, hook: hook, deliveries: setting("BENCH_DELIVERIES", 20_000),
                                                       concurrency: setting("BENCH_WORKER_CONCURRENCY", 16), rounds: rounds)
        WebhookBench.print(burnDown)
    } catch {
        fail(String(reflecting: error))
    }
    await hook.stop()
}
