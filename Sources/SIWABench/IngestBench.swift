import AppleSimulator
import AsyncHTTPClient
import Foundation
import Logging

/// One ingest measurement: the real `siwa serve` on a database of its own,
/// driven by wrk, against the pgbench ceiling of the same statement on the
/// same database, then Apple's view at a steady offered rate.
struct IngestScenario {
    let label: String
    let title: String
    /// Users on file before the first notification (their subs are the
    /// ones the notifications use, so every lookup finds a row).
    var preloadUsers = 0
    /// ANALYZE after the warm-up, as on a database autovacuum has seen.
    /// Off, the database is as fresh as a new install's.
    var analyzeAfterWarmUp = false
    /// Junk at wrk's full rate while the open loop runs.
    var junkFlood = false
    /// More settings for the `siwa worker` that runs beside the load (the
    /// app events webhook's, for `BENCH_ONLY=webhook`).
    var workerSettings: [String: String] = [:]
    /// Deliveries enqueued but not delivered: the switch turned on by hand
    /// after a worker without the webhook's settings started (the enqueue's
    /// cost alone).
    var enqueueOnly = false
}

struct IngestReport {
    let scenario: IngestScenario
    var siwaRates: [Double] = []
    var pgbenchRates: [Double] = []
    var bareRates: [Double] = []
    /// This process's CPU (µs) per request while wrk drove the bare
    /// Hummingbird route, and the bare SwiftNIO one (StackFloors).
    var bareCPU: [Double] = []
    var bareNIOCPU: [Double] = []
    /// This process's CPU (µs) to verify one notification, alone, and to
    /// record one with serve's inbox writer, alone (RecordingAlone).
    var verificationCPU: [Double] = []
    var recordingCPU: [Double] = []
    var p50: [Double] = []
    var p99: [Double] = []
    var cpu: [Double] = []
    /// PostgreSQL's CPU (µs) and WAL (bytes) per notification siwa recorded.
    var postgresCPU: [Double] = []
    var wal: [Double] = []
    /// The plain five-statement version (PlainVersion) on the same database.
    var plainRates: [Double] = []
    var plainPostgresCPU: [Double] = []
    var plainWAL: [Double] = []
    var open: LoadGenerator.Result?
    /// The same open loop against the bare HTTP route (the bench process's
    /// own Hummingbird server): the generator's and the stack's floor.
    var openFloor: LoadGenerator.Result?
    var flood: FloodReport?
    var recorded = ""
    var sent = 0
    var chain: AuditChainFigures?
    /// On a preloaded database: the admin's lookup of a user by email
    /// address (a scan of the users, sql/026), ms, a few times.
    var emailLookupMS: [Double] = []
    /// With the webhook on: the app's deliveries enqueued and completed by the end.
    var deliveries: (enqueued: String, completed: String)?

    var ratios: [Double] { zip(siwaRates, pgbenchRates).map { $0 / $1 } }
    var plainRatios: [Double] { zip(siwaRates, plainRates).map { $0 / $1 } }
}

struct FloodReport {
    var junk: Wrk.FloodResult
    var open: LoadGenerator.Result
    var rejectionRows: String
    var unrecorded: String
}

/// The notifications one scenario sends, signed before any clock starts.
struct IngestBodies {
    let warmUp: [Data]
    let rounds: [[Data]]
    let openLoop: [Data]
    let floodOpenLoop: [Data]
    /// A body whose signature does not verify under Apple's kid: the
    /// costliest junk (parsed, looked up, RSA-checked, refused).
    let junk: Data
    var total: Int { warmUp.count + rounds.map(\.count).reduce(0, +) + openLoop.count + floodOpenLoop.count }

    /// The token a body carries (`{"payload": TOKEN}`, as Apple sends it).
    static func token(of body: Data) throws -> String { try JSONDecoder().decode(Payload.self, from: body).payload }
    private struct Payload: Decodable { let payload: String }
}

enum IngestBench {
    /// Notifications and pgbench pick their subs among `bench-sub-0 ..< subRange`.
    static let subRange = 1_000_000

    static func sub(_ index: Int) -> String { "bench-sub-\(subNumber(index))" }
    /// A user's private relay address, the same in every email event about
    /// them and in the preload (Apple's relay address for a user and app
    /// does not change between its email-enabled and email-disabled events).
    static func email(_ index: Int) -> String { "user\(subNumber(index))@privaterelay.appleid.com" }
    private static func subNumber(_ index: Int) -> Int { (index &* 7919) % subRange }

    static func sign(apple: AppleSimulator, clientID: String, warmUp: Int, rounds: Int, perRound: Int, openLoop: Int) async throws -> IngestBodies {
        let total = warmUp + rounds * perRound + 2 * openLoop
        let runID = UUID().uuidString.prefix(8)
        let bodies: [Data] = try await withThrowingTaskGroup(of: (Int, [Data]).self) { group in
            let chunk = 2000
            for start in stride(from: 0, to: total, by: chunk) {
                group.addTask {
                    let slice = try (start..<min(total, start + chunk)).map { i in
                        AppleSimulator.body(for: try apple.notification(
                            type: i % 2 == 0 ? "email-enabled" : "email-disabled", sub: sub(i),
                            audience: clientID, jti: "bench-\(runID)-\(i)", email: email(i)))
                    }
                    return (start, slice)
                }
            }
            var chunks: [(Int, [Data])] = []
            for try await chunk in group { chunks.append(chunk) }
            return chunks.sorted { $0.0 < $1.0 }.flatMap(\.1)
        }
        var rest = bodies[...]
        func take(_ count: Int) -> [Data] { defer { rest = rest.dropFirst(count) }; return Array(rest.prefix(count)) }
        let warm = take(warmUp)
        let roundBodies = (0..<rounds).map { _ in take(perRound) }
        let open = take(openLoop)
        let floodOpen = take(openLoop)
        // A genuine token with one character of its signature changed.
        let token = try apple.notification(type: "account-deleted", sub: "junk", audience: clientID, jti: "junk-\(runID)")
        var characters = Array(token)
        let index = characters.count - 20
        characters[index] = characters[index] == "A" ? "B" : "A"
        return IngestBodies(warmUp: warm, rounds: roundBodies, openLoop: open, floodOpenLoop: floodOpen,
                            junk: AppleSimulator.body(for: String(characters)))
    }

    static func run(_ scenario: IngestScenario, serverURL: String, bodies: IngestBodies, clientID: String, jwksURL: String,
                    floors: StackFloors, http: HTTPClient, concurrency: Int, pgbenchSeconds: Int, offeredRate: Int) async throws -> IngestReport {
        let database = try await BenchDatabase.create(serverURL: serverURL, label: scenario.label)
        do {
            let report = try await measure(scenario, database: database, bodies: bodies, clientID: clientID, jwksURL: jwksURL,
                                           floors: floors, http: http, concurrency: concurrency, pgbenchSeconds: pgbenchSeconds,
                                           offeredRate: offeredRate)
            await database.drop()
            return report
        } catch {
            await database.drop()
            throw error
        }
    }

    private static func measure(_ scenario: IngestScenario, database: BenchDatabase, bodies: IngestBodies, clientID: String,
                                jwksURL: String, floors: StackFloors, http: HTTPClient, concurrency: Int, pgbenchSeconds: Int,
                                offeredRate: Int) async throws -> IngestReport {
        if scenario.preloadUsers > 0 {
            say("\(scenario.label): preloading \(scenario.preloadUsers) users (not timed, no ANALYZE)")
            _ = try await database.scalar("""
                INSERT INTO siwa.users (apple_sub, apple_team, email, email_event_time)
                SELECT 'bench-sub-' || g, '\(SignInCredentials.teamID)', 'user' || g || '@privaterelay.appleid.com', 0
                FROM generate_series(0, \(scenario.preloadUsers - 1)) AS g
                """)
            // The plain version's users too: both sides update rows of a
            // million-user table, not one side inserts into a small one.
            try await PlainVersion.preload(users: scenario.preloadUsers, on: database)
            // A checkpoint now, not at a moment the preload's WAL decides:
            // every round then pays the full-page images of the pages it is
            // first to touch since, on both sides, as production does after
            // each checkpoint.
            if try await database.scalar("SELECT pg_has_role('pg_checkpoint', 'MEMBER')") == "t" {
                _ = try await database.scalar("CHECKPOINT")
            } else {
                say("\(scenario.label): no CHECKPOINT after the preload (the owner is not in pg_checkpoint): WAL figures vary more")
            }
        }
        let siwa = try await ServeProcess.start(databaseURL: database.serveURL, clientID: clientID, jwksURL: jwksURL, http: http)
        // It seals the audit log while the load runs (siwa's and pgbench's
        // rows), as in production; a schema without the chain (sql/ before
        // 009, for a comparison) has nothing to seal.
        var worker: WorkerProcess?
        do {
            if try await database.scalar("SELECT to_regclass('siwa.audit_chain') IS NOT NULL") == "t" {
                worker = try WorkerProcess.start(databaseURL: database.workerURL, settings: scenario.workerSettings)
            }
            if scenario.enqueueOnly {
                // After the worker has turned it off at start (it has no URL).
                let deadline = ContinuousClock.now + .seconds(30)
                while try await database.scalar("SELECT updated_by IS NOT NULL FROM siwa.app_webhook") != "t" {
                    guard ContinuousClock.now < deadline else { throw BenchError("the worker did not start") }
                    try await Task.sleep(for: .milliseconds(50))
                }
                _ = try await database.scalar("UPDATE siwa.app_webhook SET enabled = true")
            }
            if scenario.workerSettings["SIWA_APP_WEBHOOK_URL"] != nil {
                // The worker turns enqueueing on at start: wait for it before the first notification.
                let deadline = ContinuousClock.now + .seconds(30)
                while try await database.scalar("SELECT enabled FROM siwa.app_webhook") != "t" {
                    guard ContinuousClock.now < deadline else { throw BenchError("the worker did not turn the app webhook on") }
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
            var report = try await drive(siwa, scenario: scenario, database: database, bodies: bodies, floors: floors, http: http,
                                         concurrency: concurrency, pgbenchSeconds: pgbenchSeconds, offeredRate: offeredRate)
            if let worker { report.chain = try await AuditChainFigures.measure(database: database, worker: worker) }
            if scenario.preloadUsers > 0 { report.emailLookupMS = try await emailLookups(database, user: scenario.preloadUsers / 2) }
            if scenario.workerSettings["SIWA_APP_WEBHOOK_URL"] != nil || scenario.enqueueOnly {
                report.deliveries = (try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE kind = 'app_event'"),
                                     try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE kind = 'app_event' AND state = 'completed'"))
            }
            await siwa.stop()
            _ = await worker?.stop()
            return report
        } catch {
            await siwa.stop()
            _ = await worker?.stop()
            throw error
        }
    }

    /// The admin page's lookup by address (siwa.find_user_by_email_by_key,
    /// audited like any) for users from the middle of the preload, 5 times.
    private static func emailLookups(_ database: BenchDatabase, user: Int) async throws -> [Double] {
        let key = try await database.scalar("""
            INSERT INTO siwa.api_keys (name, prefix, secret_sha256, created_by, scope)
            VALUES ('bench-admin', 'benchadm', sha256('bench'), 'siwa-bench', 'admin') RETURNING id
            """)
        var times: [Double] = []
        for attempt in 0..<5 {
            times.append(try await database.timedMilliseconds("""
                SELECT count(*) FROM siwa.find_user_by_email_by_key('User\(user + attempt)@PrivateRelay.AppleID.com', \(key))
                """))
        }
        return times
    }

    private static func drive(_ siwa: ServeProcess, scenario: IngestScenario, database: BenchDatabase, bodies: IngestBodies,
                              floors: StackFloors, http: HTTPClient, concurrency: Int, pgbenchSeconds: Int,
                              offeredRate: Int) async throws -> IngestReport {
        let siwaURL = siwa.url + "/apple/notifications"
        var report = IngestReport(scenario: scenario)
        let files = BodyFiles()
        defer { files.removeAll() }

        // Warm up connections, prepared statements and caches.
        _ = try await Wrk.run(url: siwaURL, bodiesFile: try files.write(bodies.warmUp), count: bodies.warmUp.count, connections: concurrency)
        report.sent += bodies.warmUp.count
        if scenario.analyzeAfterWarmUp { _ = try await database.scalar("ANALYZE") }

        for (round, roundBodies) in bodies.rounds.enumerated() {
            let file = try files.write(roundBodies)
            let cpuBefore = siwa.cpuSeconds
            let postgresBefore = try await PostgresCost.read(database)
            let result = try await Wrk.run(url: siwaURL, bodiesFile: file, count: roundBodies.count, connections: concurrency)
            let postgres = postgresBefore.cost(to: try await PostgresCost.read(database), per: roundBodies.count)
            report.sent += roundBodies.count
            report.cpu.append((siwa.cpuSeconds - cpuBefore) / Double(roundBodies.count) * 1e6)
            report.postgresCPU.append(postgres.cpuSeconds * 1e6)
            report.wal.append(postgres.walBytes)
            let ceiling = try await PgbenchCeiling.run(databaseURL: database.ownerURL, clients: concurrency, seconds: pgbenchSeconds)
            let plain = try await PlainVersion.notifications(on: database, count: roundBodies.count)
            report.plainRates.append(plain.rate)
            report.plainPostgresCPU.append(plain.cost.cpuSeconds * 1e6)
            report.plainWAL.append(plain.cost.walBytes)
            // The bare routes are served by this process: its CPU over the
            // run is the HTTP stack's own per request, siwa's floor.
            func bareRoute(_ url: String) async throws -> (result: Wrk.Result, cpu: Double) {
                let before = processCPUSeconds(getpid())
                let result = try await Wrk.run(url: url, bodiesFile: file, count: roundBodies.count, connections: concurrency)
                return (result, (processCPUSeconds(getpid()) - before) / Double(roundBodies.count) * 1e6)
            }
            let (bare, bareCPU) = try await bareRoute(floors.hummingbirdURL)
            report.bareCPU.append(bareCPU)
            report.bareNIOCPU.append(try await bareRoute(floors.nioURL).cpu)
            report.verificationCPU.append(try await floors.verificationCPU(Array(roundBodies.prefix(2000))))
            report.recordingCPU.append(try await RecordingAlone.cpuPerNotification(
                bodies: Array(roundBodies.prefix(5000)), verifier: floors.verifier, databaseURL: database.serveURL,
                clientID: floors.clientID, concurrency: concurrency, tag: "alone-\(round + 1)", logger: Logger(label: "siwa-bench.recording")))
            report.siwaRates.append(result.rate)
            report.pgbenchRates.append(ceiling)
            report.bareRates.append(bare.rate)
            report.p50.append(result.p50)
            report.p99.append(result.p99)
            say(String(format: "%@ round %d: siwa %.0f/s (p50 %.1f ms, p99 %.1f ms, %d failed, %.0f µs CPU each) | pgbench %.0f tps | ratio %.2f | bare HTTP %.0f/s",
                       scenario.label, round + 1, result.rate, result.p50, result.p99, result.failed, report.cpu[round], ceiling,
                       result.rate / ceiling, bare.rate))
            say(String(format: "%@ round %d costs: siwa's PostgreSQL %.0f µs CPU and %.0f B WAL each | plain version %.0f/s (16 clients), %.0f µs and %.0f B each | siwa / plain %.2f",
                       scenario.label, round + 1, report.postgresCPU[round], report.wal[round], plain.rate,
                       report.plainPostgresCPU[round], report.plainWAL[round], result.rate / plain.rate))
        }

        // Apple's view at a steady rate: an open loop from an in-process client.
        let load = LoadGenerator(url: siwaURL, client: http)
        report.open = await load.openLoop(bodies: bodies.openLoop, rate: Double(offeredRate))
        report.sent += bodies.openLoop.count
        report.openFloor = await LoadGenerator(url: floors.hummingbirdURL, client: http).openLoop(bodies: bodies.openLoop, rate: Double(offeredRate))

        if scenario.junkFlood {
            // Junk at wrk's full rate for as long as the genuine open loop runs.
            let seconds = Int((Double(bodies.floodOpenLoop.count) / Double(offeredRate)).rounded(.up)) + 1
            let junkFile = try files.write([bodies.junk])
            async let junk = Wrk.flood(url: siwaURL, bodyFile: junkFile, seconds: seconds, connections: concurrency)
            try await Task.sleep(for: .milliseconds(300))
            let open = await load.openLoop(bodies: bodies.floodOpenLoop, rate: Double(offeredRate))
            report.sent += bodies.floodOpenLoop.count
            let junkResult = try await junk
            try await Task.sleep(for: .milliseconds(500))  // the rejection writer's last batch
            report.flood = FloodReport(
                junk: junkResult, open: open,
                rejectionRows: try await database.scalar("SELECT count(*) FROM siwa.rejected_notifications WHERE occurrences = 1"),
                unrecorded: try await unrecordedCount(siwa: siwa, http: http))
        }
        // Every notification answered 200 must be in the table, once.
        report.recorded = try await database.scalar("SELECT count(*) FROM siwa.notifications WHERE jti LIKE 'bench-%'")
        return report
    }

    /// `siwa_rejections_unrecorded_total` from siwa's /metrics.
    static func unrecordedCount(siwa: ServeProcess, http: HTTPClient) async throws -> String {
        var request = HTTPClientRequest(url: siwa.metricsURL + "/metrics")
        request.method = .GET
        let response = try await http.execute(request, timeout: .seconds(5))
        let text = String(buffer: try await response.body.collect(upTo: 1 << 20))
        let line = text.split(separator: "\n").first { $0.hasPrefix("siwa_rejections_unrecorded_total ") }
        return line.map { String($0.split(separator: " ")[1]) } ?? "0"
    }
}
