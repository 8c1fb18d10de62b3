import AppleSimulator
import Foundation
import Logging
import PostgresNIO

/// The worker's validation of stored refresh tokens (TN3194), on the tokens
/// the sign-in rounds stored through siwa:
/// - throughput with the cap off (SIWA_APPLE_REQUESTS_PER_SECOND=0): `tokens`
///   made due at once, `siwa worker` started, validations/s from the first
///   `last_validated_at` to the last (the database's clock);
/// - the cap on: the simulator's `/auth/token` requests counted every 10 ms
///   while the worker validates `cap × seconds` tokens; the busiest 1 s window.
enum TokenValidationBench {
    struct Report {
        var tokens = 0
        var rates: [Double] = []
        /// µs of the worker's CPU per validation (after its first one).
        var workerCPU: [Double] = []
        /// Slowest exit of the worker on SIGTERM; nil when it had to be killed.
        var slowestStop: Duration? = .zero
        var cap = 0
        var capTokens = 0
        var capValidated = 0
        var capRate = 0.0
        var busiestWindow = 0
    }

    static func run(database: BenchDatabase, client: PostgresClient, apple: AppleSimulator, settings: [String: String],
                    rounds: Int, tokens: Int, cap: Int, capSeconds: Int, logger: Logger) async throws -> Report {
        var report = Report()
        report.tokens = min(tokens, try await count(client, "SELECT count(*) FROM siwa.apple_tokens", logger: logger))
        guard report.tokens > 1 else { throw BenchError("no stored tokens to validate") }
        for round in 1...rounds {
            try await makeDue(report.tokens, client: client, logger: logger)
            let worker = try WorkerProcess.start(databaseURL: database.workerURL,
                                                 settings: settings.merging(["SIWA_APPLE_REQUESTS_PER_SECOND": "0"]) { $1 })
            let cpu: Double
            do {
                cpu = try await waitForValidations(report.tokens, worker: worker, client: client, logger: logger)
            } catch {
                _ = await worker.stop(grace: .zero)
                throw error
            }
            report.note(stop: await worker.stop())
            let span = try await seconds(client, """
                SELECT extract(epoch FROM max(last_validated_at) - min(last_validated_at))::float8
                FROM siwa.apple_tokens WHERE last_validated_at IS NOT NULL
                """, logger: logger)
            report.rates.append(Double(report.tokens - 1) / span)
            report.workerCPU.append(cpu)
            say(String(format: "validation round %d: %d tokens, %.0f validations/s (cap off), worker %.0f µs CPU each",
                       round, report.tokens, report.rates.last ?? 0, cpu))
        }
        try await checkCap(&report, database: database, client: client, apple: apple, settings: settings, cap: cap,
                           seconds: capSeconds, logger: logger)
        return report
    }

    /// The cap on: `/auth/token` requests sampled every 10 ms; the busiest
    /// window of at most 1 s between two samples.
    static func checkCap(_ report: inout Report, database: BenchDatabase, client: PostgresClient, apple: AppleSimulator,
                         settings: [String: String], cap: Int, seconds: Int, logger: Logger) async throws {
        report.cap = cap
        report.capTokens = min(cap * seconds, report.tokens)
        try await makeDue(report.capTokens, client: client, logger: logger)
        let base = apple.tokenRequests
        let start = ContinuousClock.now
        var samples: [(at: Duration, asked: Int)] = [(.zero, 0)]
        let worker = try WorkerProcess.start(databaseURL: database.workerURL,
                                             settings: settings.merging(["SIWA_APPLE_REQUESTS_PER_SECOND": String(cap)]) { $1 })
        // Until all are asked for, and a second more (nothing else may come).
        let deadline = start + .seconds(Double(report.capTokens) / Double(cap) * 2 + 15)
        var allAsked: Duration?
        while ContinuousClock.now < deadline, allAsked.map({ (samples.last?.at ?? .zero) < $0 + .seconds(1) }) ?? true {
            try await Task.sleep(until: start + .milliseconds(10 * samples.count), clock: .continuous)
            let sample = (at: ContinuousClock.now - start, asked: apple.tokenRequests - base)
            samples.append(sample)
            if allAsked == nil, sample.asked >= report.capTokens { allAsked = sample.at }
        }
        report.note(stop: await worker.stop())
        report.busiestWindow = busiestSecond(samples)
        let asked = samples.last?.asked ?? 0
        let firstAsked = samples.first { $0.asked > 0 }?.at ?? .zero
        let span = ((allAsked ?? samples.last?.at ?? .zero) - firstAsked).seconds
        // Calls 1 ... n of a paced run are n - 1 spacings apart.
        report.capRate = Double(max(0, asked - 1)) / span
        report.capValidated = try await count(client, "SELECT count(*) FROM siwa.apple_tokens WHERE last_validated_at IS NOT NULL",
                                              logger: logger)
        say(String(format: "validation with the cap at %d/s: %d asked in %.2f s (%.1f/s), busiest 1 s window %d, %d validated",
                   cap, asked, span, report.capRate, report.busiestWindow, report.capValidated))
    }

    /// The most requests between two samples at most 1 s apart.
    static func busiestSecond(_ samples: [(at: Duration, asked: Int)]) -> Int {
        var busiest = 0
        var end = 0
        for (i, sample) in samples.enumerated() {
            end = max(end, i)
            while end + 1 < samples.count, samples[end + 1].at - sample.at <= .seconds(1) { end += 1 }
            busiest = max(busiest, samples[end].asked - sample.asked)
        }
        return busiest
    }

    /// `count` stored tokens due now and never validated; the rest not due.
    static func makeDue(_ count: Int, client: PostgresClient, logger: Logger) async throws {
        try await client.query("UPDATE siwa.apple_tokens SET validate_after = now() + interval '1 day', last_validated_at = NULL",
                               logger: logger)
        try await client.query("""
            UPDATE siwa.apple_tokens SET validate_after = now()
            WHERE user_id IN (SELECT user_id FROM siwa.apple_tokens ORDER BY user_id LIMIT \(count))
            """, logger: logger)
    }

    /// Waits until `tokens` have `last_validated_at`; returns the worker's
    /// µs of CPU per validation, counted from the first one seen (start-up excluded).
    static func waitForValidations(_ tokens: Int, worker: WorkerProcess, client: PostgresClient,
                                   logger: Logger) async throws -> Double {
        var first: (cpu: Double, done: Int)?
        var last = (done: 0, at: ContinuousClock.now)
        while true {
            let cpu = worker.cpuSeconds
            let done = try await count(client, "SELECT count(*) FROM siwa.apple_tokens WHERE last_validated_at IS NOT NULL",
                                       logger: logger)
            if first == nil, done > 0 { first = (cpu, done) }
            if done >= tokens, let first { return (cpu - first.cpu) / Double(max(1, done - first.done)) * 1e6 }
            guard worker.process.isRunning else { throw BenchError("siwa worker exited; its log is \(worker.logFile)") }
            if done > last.done { last = (done, ContinuousClock.now) }
            guard ContinuousClock.now - last.at < .seconds(30) else {
                throw BenchError("validation stalled at \(done) of \(tokens); the worker's log is \(worker.logFile)")
            }
            try await Task.sleep(for: .milliseconds(25))
        }
    }

    static func count(_ client: PostgresClient, _ sql: String, logger: Logger) async throws -> Int {
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql), logger: logger)
        for try await value in rows.decode(Int.self) { return value }
        return 0
    }

    static func seconds(_ client: PostgresClient, _ sql: String, logger: Logger) async throws -> Double {
        let rows = try await client.query(PostgresQuery(unsafeSQL: sql), logger: logger)
        for try await value in rows.decode(Double?.self) { return value ?? .nan }
        return .nan
    }
}

extension TokenValidationBench.Report {
    mutating func note(stop: Duration?) {
        guard let stop, let slowest = slowestStop else { slowestStop = nil; return }
        slowestStop = max(stop, slowest)
    }
}

extension Duration {
    var seconds: Double { self / .seconds(1) }
}
