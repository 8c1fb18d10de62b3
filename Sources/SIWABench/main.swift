import AppleSimulator
import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore

// `make bench`: siwa's committed notifications/s and latency over real HTTP,
// against the ceiling of pgbench running the same SQL, in the same run, on
// the same throwaway PostgreSQL. Signing happens before the clock starts.


/// A line on stdout now (print is block-buffered into a pipe).
func say(_ line: String = "") {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func setting(_ name: String, _ fallback: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap(Int.init) ?? fallback
}

let databaseURL = ProcessInfo.processInfo.environment["SIWA_DATABASE_URL"] ?? ""
/// One line on stderr and a failed exit.
func fail(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("siwa-bench: \(message)\n".utf8))
    exit(status)
}

guard !databaseURL.isEmpty else { fail("SIWA_DATABASE_URL is required (make bench sets it)", status: 2) }
let rounds = setting("BENCH_ROUNDS", 3)
let perRound = setting("BENCH_NOTIFICATIONS", 10_000)
let concurrency = setting("BENCH_CONCURRENCY", 64)
let pgbenchSeconds = setting("BENCH_PGBENCH_SECONDS", 5)
let offeredRate = setting("BENCH_OFFERED_RATE", 1000)
let openLoopCount = offeredRate * setting("BENCH_OPEN_LOOP_SECONDS", 5)
// BENCH_ONLY=ingest or worker runs one half.
let only = ProcessInfo.processInfo.environment["BENCH_ONLY"] ?? ""

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    handler.logLevel = .error
    return handler
}
let logger = Logger(label: "siwa-bench")

if only != "worker" {
    // Apple stand-in (its JWKS endpoint), then the real `siwa serve` in its own process.
    let apple = try AppleSimulator()
    let appleServer = try await apple.start(logger: logger)
    let clientID = "com.example.siwa.bench"
    // The open loop's client: enough connections that a slow answer never
    // makes the next send queue in the client.
    var httpConfiguration = HTTPClient.Configuration()
    httpConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = concurrency
    let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: httpConfiguration)
    let siwa = try await ServeProcess.start(databaseURL: databaseURL, clientID: clientID,
                                            jwksURL: appleServer.baseURL + "/auth/keys", http: http)
    let siwaURL = siwa.url + "/apple/notifications"

    // A second ceiling: the bare HTTP stack. A Hummingbird route that reads
    // the body and answers 200 with no work at all, on the same two cores,
    // under the same load: what any Swift HTTP service could do here.
    let bareRouter = Router(context: BasicRequestContext.self)
    bareRouter.post("/apple/notifications") { request, _ -> Response in
        _ = try await request.body.collect(upTo: 64 * 1024)
        return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: #"{"status":"recorded"}"#)))
    }
    let bareServer = try await RunningServer.start(router: bareRouter, port: 0, logger: logger)

    // From here on siwa serve is stopped on failure too: an orphaned server
    // would keep running and hold the bench database open.
    do {
        // Pre-sign everything (RSA signing is Apple's cost, not ours).
        let warmUp = 5000
        let total = warmUp + rounds * perRound + openLoopCount
        say("signing \(total) notifications (not timed)…")
        let runID = UUID().uuidString.prefix(8)
        let bodies: [Data] = try await withThrowingTaskGroup(of: (Int, [Data]).self) { group in
            let chunk = 2000
            for start in stride(from: 0, to: total, by: chunk) {
                group.addTask {
                    let slice = try (start..<min(total, start + chunk)).map { i in
                        AppleSimulator.body(for: try apple.notification(
                            type: i % 2 == 0 ? "email-enabled" : "email-disabled", sub: "bench-sub-\(i % 5000)",
                            audience: clientID, jti: "bench-\(runID)-\(i)", email: "bench@privaterelay.appleid.com"))
                    }
                    return (start, slice)
                }
            }
            var chunks: [(Int, [Data])] = []
            for try await chunk in group { chunks.append(chunk) }
            return chunks.sorted { $0.0 < $1.0 }.flatMap(\.1)
        }
        // wrk reads its bodies from files, one per line.
        let bodyFiles = BodyFiles()
        defer { bodyFiles.removeAll() }
        let warmUpFile = try bodyFiles.write(bodies.prefix(warmUp))
        let roundFiles = try (0..<rounds).map { round in
            try bodyFiles.write(bodies[(warmUp + round * perRound)..<(warmUp + (round + 1) * perRound)])
        }

        say("signed; warming up, then \(rounds) rounds of \(perRound) at \(concurrency) concurrent connections (wrk)")

        // Warm up connections, prepared statements and caches.
        // One notification per bench user (5,000), so the users exist before the
        // statistics are taken, as in a database that has been running.
        _ = try await Wrk.run(url: siwaURL, bodiesFile: warmUpFile, count: warmUp, connections: concurrency)
        // Statistics, as autovacuum has them on any database that has run for a
        // minute. Without them the plans cached during the warm-up (users table
        // empty) scan siwa.users for every notification; ANALYZE also makes every
        // connection plan again. pgbench then plans with the same statistics.
        _ = try await Shell.run("psql", ["-q", databaseURL, "-c", "ANALYZE"])

        var bareRates: [Double] = []
        var siwaRates: [Double] = []
        var pgbenchRates: [Double] = []
        var closedP50: [Double] = []
        var closedP99: [Double] = []
        var cpuPerNotification: [Double] = []
        for round in 0..<rounds {
            let cpuBefore = siwa.cpuSeconds
            let result = try await Wrk.run(url: siwaURL, bodiesFile: roundFiles[round], count: perRound, connections: concurrency)
            cpuPerNotification.append((siwa.cpuSeconds - cpuBefore) / Double(perRound) * 1e6)
            let ceiling = try await PgbenchCeiling.run(databaseURL: databaseURL, clients: concurrency, seconds: pgbenchSeconds)
            let bareResult = try await Wrk.run(url: bareServer.baseURL + "/apple/notifications", bodiesFile: roundFiles[round], count: perRound,
                                               connections: concurrency)
            bareRates.append(bareResult.rate)
            siwaRates.append(result.rate)
            pgbenchRates.append(ceiling)
            closedP50.append(result.p50)
            closedP99.append(result.p99)
            say(String(format: "round %d: siwa %.0f notifications/s (p50 %.1f ms, p99 %.1f ms, %d failed, %.0f µs CPU each) | pgbench ceiling %.0f tps | ratio %.2f | bare HTTP %.0f/s",
                         round + 1, result.rate, result.p50, result.p99, result.failed, cpuPerNotification[round], ceiling, result.rate / ceiling,
                         bareResult.rate))
        }

        // Apple's view at a steady rate: an open loop from an in-process client
        // (light load, so the client's own cost does not matter here).
        let load = LoadGenerator(url: siwaURL, client: http)
        let open = await load.openLoop(bodies: Array(bodies.suffix(openLoopCount)), rate: Double(offeredRate))
        // Every notification answered 200 must be in the table, once.
        let recorded = try await Shell.run("psql", ["-qtA", databaseURL, "-c", "SELECT count(*) FROM siwa.notifications WHERE jti LIKE 'bench-%'"])

        let ratios = zip(siwaRates, pgbenchRates).map { $0 / $1 }
        say("")
        say("== siwa ingest benchmark (release build, `siwa serve` with JSON logs at info, \(ProcessInfo.processInfo.activeProcessorCount) cores, \(concurrency) concurrent connections from wrk)")
        say(String(format: "committed notifications/s   median %.0f   (rounds: %@)", median(siwaRates),
                     siwaRates.map { String(format: "%.0f", $0) }.joined(separator: ", ")))
        say(String(format: "siwa CPU per notification   median %.0f µs   (user + system time of the siwa process)", median(cpuPerNotification)))
        say(String(format: "closed-loop latency         p50 %.1f ms   p99 %.1f ms   (medians over rounds)", median(closedP50), median(closedP99)))
        say(String(format: "ceiling: pgbench, same SQL  median %.0f tps   (one notification per transaction, %d clients)",
                     median(pgbenchRates), concurrency))
        say(String(format: "ratio siwa / ceiling        median %.2f   (target >= 1.0; rounds: %@)", median(ratios),
                     ratios.map { String(format: "%.2f", $0) }.joined(separator: ", ")))
        say(String(format: "ceiling: bare HTTP route     median %.0f/s   (same load, no verification, no database)", median(bareRates)))
        say(String(format: "ratio siwa / bare HTTP       median %.2f", median(zip(siwaRates, bareRates).map { $0 / $1 })))
        say(String(format: "open loop at %d/s offered    achieved %.0f/s   p50 %.1f ms   p99 %.1f ms   failed %d   (target p99 <= 25 ms)",
                     offeredRate, open.rate, open.percentile(0.5), open.percentile(0.99), open.failed))
        say("recorded in siwa.notifications: \(recorded.trimmingCharacters(in: .whitespacesAndNewlines)) of \(total) sent")
    } catch {
        await siwa.stop()
        fail("\(error)")
    }
    await siwa.stop()
    _ = try? await http.shutdown().get()
    await appleServer.stop()
    await bareServer.stop()
}


if only != "ingest" {
    let jobs = setting("BENCH_JOBS", 50_000)
    let workerConcurrency = setting("BENCH_WORKER_CONCURRENCY", 16)
    let pgbenchClients = setting("BENCH_PGBENCH_JOB_CLIENTS", 16)
    say("")
    say("worker: \(rounds) rounds of burning down \(jobs) jobs (concurrency \(workerConcurrency)), pgbench ceiling with \(pgbenchClients) clients")
    let report = try await WorkerBench.run(databaseURL: databaseURL, rounds: rounds, jobs: jobs, concurrency: workerConcurrency,
                                           pgbenchClients: pgbenchClients, pgbenchSeconds: pgbenchSeconds,
                                           latencySamples: setting("BENCH_WAKE_SAMPLES", 200), logger: logger)
    let ratios = zip(report.burnDown, report.ceiling).map { $0 / $1 }
    let wake = report.wakeLatenciesMS.sorted()
    say("")
    say("== siwa worker benchmark (release build, \(ProcessInfo.processInfo.activeProcessorCount) cores, trivial plan: the built-in step)")
    say(String(format: "burn-down of %d jobs         median %.0f jobs/s   (rounds: %@; worker concurrency %d)", jobs, median(report.burnDown),
               report.burnDown.map { String(format: "%.0f", $0) }.joined(separator: ", "), workerConcurrency))
    say(String(format: "ceiling: pgbench, same SQL   median %.0f jobs/s   (claim + step-and-complete, one job per transaction, %d clients)",
               median(report.ceiling), pgbenchClients))
    say(String(format: "ratio worker / ceiling       median %.2f   (target >= 0.8; rounds: %@)", median(ratios),
               ratios.map { String(format: "%.2f", $0) }.joined(separator: ", ")))
    say(String(format: "NOTIFY wake-up to claim      p50 %.1f ms   p99 %.1f ms   max %.1f ms   (%d idle samples, polling at 30 s; target p99 < 100 ms)",
               wake[wake.count / 2], wake[min(wake.count - 1, Int(Double(wake.count) * 0.99))], wake.last ?? 0, wake.count))
}
