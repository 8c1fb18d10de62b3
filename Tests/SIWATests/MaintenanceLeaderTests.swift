import AccountLifecycle
import AccountStore
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Testing

/// The rescuer, the cleaner, the audit sealer, token validation and the
/// pruning of refused deliveries run on one worker at a time, elected by a session advisory lock
/// (`MaintenanceLeader`); when the leader dies another takes over within
/// two lease periods; a failing maintenance pass is logged at error and
/// counted.
@Suite("Maintenance leader", .testDatabases)
struct MaintenanceLeaderTests {
    /// The lock's key as pg_locks shows it (a bigint key: classid is its
    /// high 32 bits, objid its low ones), held in this database.
    static let held = """
        locktype = 'advisory' AND granted AND classid = \(MaintenanceLock.key >> 32) AND objid = \(MaintenanceLock.key & 0xFFFF_FFFF)
        AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        """

    /// A running job whose worker died: its lease ran out ten seconds ago.
    static func insertExpiredJob(_ harness: WorkerHarness, sub: String) async throws {
        try await harness.database.execute("""
            INSERT INTO siwa.users (apple_sub, email, apple_team) VALUES ('\(sub)', '\(sub)@privaterelay.appleid.com', 'TEAM123456');
            INSERT INTO siwa.jobs (kind, args, state, attempt, attempted_at, locked_by, locked_until)
                VALUES ('purge_user', jsonb_build_object('apple_sub', '\(sub)', 'apple_team', 'TEAM123456'), 'running', 1, now() - interval '1 minute',
                        'dead-worker', now() - interval '10 seconds');
            """)
    }

    static func completed(_ harness: WorkerHarness, sub: String) async throws -> Bool {
        try await harness.database.scalar("SELECT count(*) FROM siwa.jobs WHERE state = 'completed' AND args->>'apple_sub' = '\(sub)'") == 1
    }

    /// One scrape's value, nil while the listener is not up yet.
    static func value(_ base: String, _ name: String, _ labels: [String: String] = [:]) async -> Double? {
        try? await PrometheusText.scrape(base).value(name, labels)
    }

    /// Two real workers on one database: exactly one leads (its gauge, its
    /// log line) and only it rescues; kill -9 of it, and the other leads
    /// within two lease periods and rescues the next dead worker's job.
    @Test(.timeLimit(.minutes(3)))
    func oneOfTwoWorkersLeadsAndTheOtherTakesOverWhenItIsKilled() async throws {
        let lease = 4.0
        let harness = try await WorkerHarness.start(settings: ["SIWA_JOB_LEASE_SECONDS": "4"])
        try atTestEnd { await harness.stop() }
        // Refused deliveries, one past the retention (30 days by default).
        try await harness.database.execute("""
            INSERT INTO siwa.rejected_notifications (received_at, reason, body_sha256, body_bytes)
            VALUES (now() - interval '40 days', 'old', '', 0), (now(), 'recent', '', 0);
            """)
        let ports = [try freePort(), try freePort()]
        let workers = try ports.map { try harness.startWorker(["SIWA_WORKER_METRICS_PORT": String($0)]) }
        let bases = ports.map { "http://127.0.0.1:\($0)" }
        func gauges() async -> [Double?] {
            var values: [Double?] = []
            for base in bases { values.append(await Self.value(base, "siwa_maintenance_leader")) }
            return values
        }
        let elected = try await eventually(upTo: .seconds(30)) { await gauges().compactMap { $0 }.sorted() == [0, 1] }
        let values = await gauges()
        #expect(elected, "\(values) \(workers[0].log.suffix(1500)) \(workers[1].log.suffix(1500))")
        let leader = try #require(values.firstIndex(of: 1))
        let follower = 1 - leader
        #expect(try await harness.database.scalar("SELECT count(*) FROM pg_locks WHERE \(Self.held)") == 1)
        #expect(workers[leader].log.contains("This worker leads maintenance"))
        #expect(!workers[follower].log.contains("This worker leads maintenance"), "\(workers[follower].log.suffix(2000))")
        #expect(workers[follower].log.contains("Another worker leads maintenance"))
        // The leader prunes refused deliveries when it starts leading.
        #expect(try await harness.wait(upTo: .seconds(30)) {
            try await harness.database.strings("SELECT reason FROM siwa.rejected_notifications") == ["recent"]
        })

        // Only the leader rescues.
        try await Self.insertExpiredJob(harness, sub: "lead.before")
        #expect(try await harness.wait(upTo: .seconds(30)) { try await Self.completed(harness, sub: "lead.before") })
        let kind = ["kind": "purge_user"]
        #expect(await Self.value(bases[leader], "siwa_worker_jobs_rescued_total", kind) == 1)
        #expect(await Self.value(bases[follower], "siwa_worker_jobs_rescued_total", kind) == 0)
        #expect(await gauges()[follower] == 0)

        await workers[leader].kill9()
        let killed = ContinuousClock.now
        let tookOver = try await eventually(upTo: .seconds(2 * lease)) {
            await Self.value(bases[follower], "siwa_maintenance_leader") == 1
        }
        #expect(tookOver, "no takeover within two lease periods: \(workers[follower].log.suffix(2000))")
        #expect(ContinuousClock.now - killed <= .seconds(2 * lease))
        #expect(workers[follower].log.contains("This worker leads maintenance"))

        // And maintenance happens there: the next dead worker's job is rescued.
        try await Self.insertExpiredJob(harness, sub: "lead.after")
        #expect(try await harness.wait(upTo: .seconds(30)) { try await Self.completed(harness, sub: "lead.after") },
                "\(workers[follower].log.suffix(2000))")
        #expect(await Self.value(bases[follower], "siwa_worker_jobs_rescued_total", kind) == 1)
        #expect(try await harness.database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'job.rescued'") == 2)

        // SIGTERM releases the lock at once (the connection closes).
        #expect(await workers[follower].terminate() == 0)
        #expect(try await eventually(upTo: .seconds(10)) {
            try await harness.database.scalar("SELECT count(*) FROM pg_locks WHERE \(Self.held)") == 0
        })
        #expect(workers[follower].log.contains("Maintenance stopped: shutting down"))
    }

    /// A rescuer whose pass fails (here the database refuses the rescue's
    /// audit row) says so at error, every pass, and counts it in /metrics;
    /// the log carries no text of the database's (only its SQLSTATE). Once
    /// the cause is gone the job is rescued.
    @Test(.timeLimit(.minutes(2)))
    func aFailingRescuerIsLoggedAtErrorAndCounted() async throws {
        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        try await harness.database.execute("""
            CREATE FUNCTION siwa.test_refuse_rescue() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.action = 'job.rescued' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$;
            CREATE TRIGGER test_refuse_rescue BEFORE INSERT ON siwa.audit_log
                FOR EACH ROW EXECUTE FUNCTION siwa.test_refuse_rescue();
            """)
        try await Self.insertExpiredJob(harness, sub: "fail.rescue")
        let port = try freePort()
        let base = "http://127.0.0.1:\(port)"
        let worker = try harness.startWorker(["SIWA_WORKER_METRICS_PORT": String(port)], journal: true)
        let rescuer = ["task": MaintenanceTask.jobRescuer.rawValue]
        // Every half lease (1 s here) a pass, and each one fails.
        let counted = try await eventually(upTo: .seconds(30)) {
            (await Self.value(base, "siwa_maintenance_failures_total", rescuer) ?? 0) >= 2
        }
        #expect(counted, "\(worker.log.suffix(2000))")
        #expect(await Self.value(base, "siwa_maintenance_leader") == 1)
        #expect(await Self.value(base, "siwa_maintenance_failures_total", ["task": MaintenanceTask.jobCleaner.rawValue]) == 0)
        let failures = worker.log.split(separator: "\n").filter { $0.contains("Maintenance pass failed: the rescuer") }
        #expect(failures.count >= 2, "\(worker.log.suffix(2000))")
        // <3>: journald's priority for error.
        #expect(failures.allSatisfy { $0.hasPrefix("<3>") && $0.contains("job_rescuer") && $0.contains("P0001") }, "\(failures)")
        #expect(!worker.log.contains("refused by the test"))
        #expect(try await harness.count(state: "running") == 1)

        try await harness.database.execute("DROP TRIGGER test_refuse_rescue ON siwa.audit_log")
        #expect(try await harness.wait(upTo: .seconds(30)) { try await Self.completed(harness, sub: "fail.rescue") },
                "\(worker.log.suffix(2000))")
        #expect(await Self.value(base, "siwa_worker_jobs_rescued_total", ["kind": "purge_user"]) == 1)
        #expect(await worker.terminate() == 0)
    }

    /// In-process: two leaders, each with a duty that records when it runs.
    /// The database ends the leader's lock session (pg_terminate_backend, as
    /// a server restart or an operator would): the leader stops its duty at
    /// once, and the other starts its own within two lease periods, never
    /// while the first still runs; the first goes back to following.
    @Test(.timeLimit(.minutes(2)))
    func aLeaderWhoseSessionEndsStopsBeforeAnotherStarts() async throws {
        let database = try await TestDatabase.create()
        var configuration = try database.workerConfiguration
        configuration.tls = .disable
        let tracker = DutyTracker()
        let leaseSeconds = 2.0
        let leaders = ["a", "b"].map { name in
            MaintenanceLeader(lock: MaintenanceLock(database: configuration, logger: TestEnvironment.logger),
                              configuration: .init(leaseSeconds: leaseSeconds), duties: [ProbeDuty(name: name, tracker: tracker)],
                              metrics: .disabled, worker: name, logger: TestEnvironment.logger)
        }
        let tasks = leaders.map { leader in Task { try await leader.run() } }
        defer { for task in tasks { task.cancel() } }

        #expect(try await eventually(upTo: .seconds(20)) { tracker.active.count == 1 })
        let first = try #require(tracker.active.first)
        #expect(try await database.scalar("SELECT count(*) FROM pg_locks WHERE \(Self.held)") == 1)

        let terminated = try await database.superuserScalar("""
            SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_locks WHERE \(Self.held)) AS t
            """)
        #expect(terminated == 1)
        let ended = ContinuousClock.now
        let tookOver = try await eventually(upTo: .seconds(2 * leaseSeconds)) {
            tracker.active.count == 1 && tracker.active.first != first
        }
        #expect(tookOver, "\(tracker.starts)")
        #expect(ContinuousClock.now - ended <= .seconds(2 * leaseSeconds))
        #expect(!tracker.overlapped, "two duties ran at once: \(tracker.starts)")
        // The first connects again and follows: both sessions there, one lock.
        #expect(try await eventually(upTo: .seconds(20)) {
            try await database.superuserScalar("""
                SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = '\(MaintenanceLock.applicationName)'
                """) == 2
        })
        #expect(tracker.starts.count == 2)
        #expect(tracker.active.count == 1)

        // Cancelled (as at shutdown): the duty stops, the lock is released.
        for task in tasks { task.cancel() }
        for task in tasks { _ = try? await task.value }
        #expect(tracker.active.isEmpty)
        #expect(try await eventually(upTo: .seconds(10)) {
            try await database.scalar("SELECT count(*) FROM pg_locks WHERE \(Self.held)") == 0
        })
    }
}

/// Which probe duties run now, which started in what order, and whether
/// two ever ran at once.
final class DutyTracker: Sendable {
    private struct State {
        var active: Set<String> = []
        var starts: [String] = []
        var overlapped = false
    }
    private let state = Mutex(State())

    var active: Set<String> { state.withLock { $0.active } }
    var starts: [String] { state.withLock { $0.starts } }
    var overlapped: Bool { state.withLock { $0.overlapped } }

    func start(_ name: String) {
        state.withLock { state in
            if !state.active.isEmpty { state.overlapped = true }
            state.active.insert(name)
            state.starts.append(name)
        }
    }

    func stop(_ name: String) { _ = state.withLock { $0.active.remove(name) } }
}

/// A maintenance duty that only records that it runs, until cancelled.
struct ProbeDuty: Service {
    let name: String
    let tracker: DutyTracker

    func run() async throws {
        tracker.start(name)
        defer { tracker.stop(name) }
        while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(20)) }
    }
}
