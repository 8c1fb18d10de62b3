import SIWAWorker
import SIWAConfiguration
import AccountLifecycle
import AccountStore
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import SIWAServer

/// The worker's half of `make bench`:
/// - burn-down: `jobs` purge jobs (trivial plan: the built-in step only)
///   waiting in the queue; jobs/s from the in-process worker's start until
///   the last one is completed;
/// - ceiling, same run and server: pgbench running the worker's own claim and
///   step-and-complete statements (ClaimJobsStatement, ErasePersonalDataStatement),
///   one job per transaction;
/// - wake-up latency: one job at a time enqueued into an idle worker whose
///   polling is slowed to 30 s, so only NOTIFY can wake it; created_at ->
///   attempted_at, both stamped by the database;
/// - with BENCH_RECEIPTS=1, each round burns down as many jobs again with
///   deletion receipts on (an ES256 signature and a row per purge, in the
///   completing transaction), beside the burn-down without.
enum WorkerBench {
    struct Report {
        var burnDown: [Double] = []
        /// µs of this process's CPU (the in-process worker's, and the 20 ms
        /// completion poll's) and of PostgreSQL's per job burnt down.
        var burnDownCPU: [Double] = []
        var burnDownPostgresCPU: [Double] = []
        /// With deletion receipts signed (BENCH_RECEIPTS=1), else empty.
        var burnDownWithReceipts: [Double] = []
        var ceiling: [Double] = []
        /// The plain claim-one-and-complete loop (PlainVersion), jobs/s.
        var plain: [Double] = []
        /// µs of PostgreSQL's CPU per job of the plain loop.
        var plainPostgresCPU: [Double] = []
        var wakeLatenciesMS: [Double] = []
    }

    /// Set-up and pgbench as the owner; the worker as the runtime role.
    static func run(database: BenchDatabase, rounds: Int, jobs: Int, concurrency: Int, pgbenchClients: Int,
                    pgbenchSeconds: Int, latencySamples: Int, receipts: Bool, logger: Logger) async throws -> Report {
        let databaseURL = database.ownerURL
        let workerURL = database.workerURL
        let configuration = try DatabaseConfiguration(url: databaseURL, maximumConnections: 4)
        return try await configuration.withClient { client in
            var report = Report()
            for round in 1...rounds {
                try await reset(client, logger: logger)
                try await enqueue(jobs * 2, prefix: "pgb\(round)", client: client, logger: logger)
                let ceiling = try await pgbenchCeiling(databaseURL: databaseURL, clients: pgbenchClients, seconds: pgbenchSeconds)
                try await reset(client, logger: logger)
                let postgresBefore = try await PostgresCost.read(database)
                let cpuBefore = processCPUSeconds(getpid())
                let rate = try await burnDown(jobs: jobs, round: round, databaseURL: workerURL, concurrency: concurrency,
                                              client: client, logger: logger)
                let cpu = (processCPUSeconds(getpid()) - cpuBefore) / Double(jobs) * 1e6
                let postgres = postgresBefore.cost(to: try await PostgresCost.read(database), per: jobs).cpuSeconds * 1e6
                let plainFigures = try await PlainVersion.jobs(on: database, jobs: 200_000, seconds: pgbenchSeconds)
                let plain = plainFigures.rate
                _ = try await database.scalar("TRUNCATE plain.jobs")
                report.burnDown.append(rate)
                report.burnDownCPU.append(cpu)
                report.burnDownPostgresCPU.append(postgres)
                report.ceiling.append(ceiling)
                report.plain.append(plain)
                report.plainPostgresCPU.append(plainFigures.cost.cpuSeconds * 1e6)
                say(String(format: "worker round %d: burn-down %.0f jobs/s (worker %.0f µs CPU, PostgreSQL %.0f µs per job) | pgbench ceiling %.0f jobs/s | ratio %.2f | plain claim+complete %.0f jobs/s (%d clients, PostgreSQL %.0f µs per job) | ratio %.2f",
                           round, rate, cpu, postgres, ceiling, rate / ceiling, plain, PlainVersion.workerClients,
                           plainFigures.cost.cpuSeconds * 1e6, rate / plain))
                if receipts {
                    try await reset(client, logger: logger)
                    let signed = try await burnDown(jobs: jobs, round: round, databaseURL: workerURL, concurrency: concurrency,
                                                    client: client, logger: logger, settings: try receiptSettings())
                    report.burnDownWithReceipts.append(signed)
                    say(String(format: "worker round %d: burn-down with receipts %.0f jobs/s (%.2f of the burn-down without)",
                               round, signed, signed / rate))
                }
            }
            try await reset(client, logger: logger)
            report.wakeLatenciesMS = try await wakeLatencies(samples: latencySamples, databaseURL: workerURL,
                                                             client: client, logger: logger)
            return report
        }
    }

    /// An empty queue for each measurement: TRUNCATE, so neither side pays
    /// for the dead rows of the one before.
    static func reset(_ client: PostgresClient, logger: Logger) async throws {
        try await client.query("TRUNCATE siwa.jobs", logger: logger)
    }

    /// `count` purge jobs, each for a user with an email to erase, in one statement.
    static func enqueue(_ count: Int, prefix: String, client: PostgresClient, logger: Logger) async throws {
        try await client.query("""
            INSERT INTO siwa.users (apple_sub, apple_team, email)
            SELECT \(prefix) || '.' || i, \(SignInCredentials.teamID), 'bench@privaterelay.appleid.com' FROM generate_series(1, \(count)) AS i
            ON CONFLICT (apple_sub, apple_team) DO UPDATE SET email = excluded.email
            """, logger: logger)
        try await client.query("""
            INSERT INTO siwa.jobs (kind, args)
            SELECT 'purge_user', jsonb_build_object('apple_sub', \(prefix) || '.' || i, 'apple_team', \(SignInCredentials.teamID)::text,
                                                    'event_type', 'account-delete')
            FROM generate_series(1, \(count)) AS i
            """, logger: logger)
        // Both sides start from fresh statistics, as autovacuum would give them.
        try await client.query("ANALYZE siwa.jobs, siwa.users", logger: logger)
    }

    /// The worker's receipt settings, with a fresh key in a temporary file.
    static func receiptSettings() throws -> [String: String] {
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-bench-receipt-\(UUID().uuidString).pem")
        try Data(DeletionReceiptSigner.newKeyPEM().utf8).write(to: keyFile)
        return ["SIWA_RECEIPT_KEY_FILE": keyFile.path, "SIWA_RECEIPT_ISSUER": "https://siwa-bench.invalid"]
    }

    static func burnDown(jobs: Int, round: Int, databaseURL: String, concurrency: Int,
                         client: PostgresClient, logger: Logger, settings: [String: String] = [:]) async throws -> Double {
        try await enqueue(jobs, prefix: "burn\(round)", client: client, logger: logger)
        let start = ContinuousClock.now
        let worker = try startWorker(databaseURL: databaseURL, concurrency: concurrency, pollSeconds: 1, logger: logger,
                                     settings: settings)
        defer { Task { await worker.triggerGracefulShutdown() } }
        while try await unfinished(client, logger: logger) {
            try await Task.sleep(for: .milliseconds(20))
        }
        let elapsed = ContinuousClock.now - start
        await worker.triggerGracefulShutdown()
        let done = try await completed(client, logger: logger)
        guard done == jobs else { throw BenchError("burn-down: \(done) of \(jobs) jobs completed (the others failed)") }
        return Double(jobs) / (elapsed / .seconds(1))
    }

    static func wakeLatencies(samples: Int, databaseURL: String, client: PostgresClient, logger: Logger) async throws -> [Double] {
        let worker = try startWorker(databaseURL: databaseURL, concurrency: 4, pollSeconds: 30, logger: logger)
        defer { Task { await worker.triggerGracefulShutdown() } }
        try await Task.sleep(for: .seconds(1))
        var latencies: [Double] = []
        for sample in 0..<samples {
            let rows = try await client.query("""
                INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', jsonb_build_object('apple_sub', 'wake.' || \(sample),
                                                                                   'apple_team', \(SignInCredentials.teamID)::text))
                RETURNING id
                """, logger: logger)
            var id: Int64 = 0
            for try await value in rows.decode(Int64.self) { id = value }
            while true {
                let state = try await client.query("""
                    SELECT extract(epoch FROM attempted_at - created_at)::float8 * 1000 FROM siwa.jobs
                    WHERE id = \(id) AND state = 'completed'
                    """, logger: logger)
                var latency: Double?
                for try await value in state.decode(Double.self) { latency = value }
                if let latency {
                    latencies.append(latency)
                    break
                }
                try await Task.sleep(for: .milliseconds(2))
            }
            // Idle between samples, as events arrive in real life.
            try await Task.sleep(for: .milliseconds(Int.random(in: 5...25)))
        }
        await worker.triggerGracefulShutdown()
        return latencies
    }

    /// Whether a job is still runnable or running: two probes of the queue's
    /// partial indexes, cheap enough to ask every 20 ms (counting the
    /// completed jobs scans the table, and so took a core of PostgreSQL's
    /// two from the worker it measured).
    static func unfinished(_ client: PostgresClient, logger: Logger) async throws -> Bool {
        let rows = try await client.query("""
            SELECT EXISTS (SELECT FROM siwa.jobs WHERE state IN ('available', 'retryable'))
                OR EXISTS (SELECT FROM siwa.jobs WHERE state = 'running')
            """, logger: logger)
        for try await value in rows.decode(Bool.self) { return value }
        return false
    }

    static func completed(_ client: PostgresClient, logger: Logger) async throws -> Int {
        let rows = try await client.query("SELECT count(*) FROM siwa.jobs WHERE state = 'completed'", logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// The in-process worker, as `siwa worker` builds it, without a plan.
    static func startWorker(databaseURL: String, concurrency: Int, pollSeconds: Double, logger: Logger,
                            settings extra: [String: String] = [:]) throws -> ServiceGroup {
        let settings = try WorkerSettings(environment: SettingsReader([
            "SIWA_DATABASE_URL": databaseURL,
            "SIWA_WORKER_CONCURRENCY": String(concurrency),
            "SIWA_WORKER_POLL_SECONDS": String(pollSeconds),
        ].merging(extra) { $1 }))
        let assembly = try WorkerAssembly(settings: settings, environment: [:], migrations: nil, logger: logger)
        let group = ServiceGroup(configuration: .init(services: assembly.services.map { .init(service: $0) }, logger: logger))
        Task { try await group.run() }
        return group
    }

    /// pgbench: the worker's claim (one job) and its built-in step that also
    /// completes the job (after locking the user, as JobQueue does), one job
    /// per transaction; returns jobs/s.
    static func pgbenchCeiling(databaseURL: String, clients: Int, seconds: Int) async throws -> Double {
        let claim = PgbenchScript.oneLine(ClaimJobsStatement.sql, substitutions: [
            ("$1", "('pgbench-' || :client_id)"), ("$2", "1"), ("$3", "ARRAY['purge_user']"), ("$4", "60"),
        ])
        let step = PgbenchScript.oneLine(ErasePersonalDataStatement.sql, substitutions: [
            ("$1", "ARRAY[:id]"), ("$2", "ARRAY[:lease]"), ("$3", "ARRAY[true]"),
        ])
        let lock = PgbenchScript.oneLine(PurgeQueue.lockUsersSQL, substitutions: [("$1", "ARRAY[:id]")])
        let script = "\(claim) \\gset\nBEGIN;\n\(lock);\n\(step);\nCOMMIT;\n"
        return try await Pgbench.run(script: script, databaseURL: databaseURL, clients: clients, seconds: seconds)
    }
}
