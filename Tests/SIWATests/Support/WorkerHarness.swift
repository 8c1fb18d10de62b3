import AccountStore
import AppleSimulator
import ChildProcesses
import Foundation
import PostgresNIO
#if canImport(Glibc)
import Glibc
#endif

/// What the worker tests share: a migrated database with a small "app"
/// schema for the purge plan to clean, a downstream webhook stub, and a
/// purge plan file that uses both. Workers run as real `siwa worker`
/// processes, so kill -9 and SIGTERM are the real thing.
final class WorkerHarness: Sendable {
    let database: TestDatabase
    let downstream: DownstreamStub
    let downstreamServer: RunningServer
    let planFile: String
    let settings: [String: String]

    /// The plan's steps after the built-in one.
    static let sqlStep = "app-data"
    static let httpStep = "notify-crm"
    static let analyticsStep = "analytics"

    /// - Parameters:
    ///   - slowSQL: seconds each SQL step sleeps (a slow step to kill a worker in).
    ///   - settings: extra or overriding `SIWA_*` settings for the workers.
    ///   - analytics: another database with a table `events (apple_sub)`, cleaned
    ///     by a third step through `database_url_env` (at-least-once).
    ///   - httpTimeout: the webhook step's `timeout_seconds`.
    ///   - planSteps: replaces the plan's steps; given the downstream's hook URL.
    static func start(database: TestDatabase? = nil, slowSQL: Double = 0, analytics: TestDatabase? = nil,
                      httpTimeout: Double = 5, planSteps: (@Sendable (String) -> [[String: Any]])? = nil,
                      settings extra: [String: String] = [:]) async throws -> WorkerHarness {
        let database = if let database { database } else { try await TestDatabase.create() }
        try await database.execute("""
            CREATE SCHEMA app;
            CREATE TABLE app.profiles (apple_sub text NOT NULL, display_name text);
            CREATE TABLE app.purge_log (apple_sub text NOT NULL, siwa_user_id bigint, apple_team text,
                                        purged_at timestamptz NOT NULL DEFAULT now());
            -- The plan's SQL runs as the purge role (SIWA_PURGE_ROLE): the app
            -- grants it what the plan does, as an operator would; neither
            -- serve's role nor the worker's (NOINHERIT) holds these.
            GRANT USAGE ON SCHEMA app TO \(TestDatabase.purgeRole);
            GRANT SELECT, INSERT, DELETE ON ALL TABLES IN SCHEMA app TO \(TestDatabase.purgeRole);
            """)
        try await analytics?.execute("GRANT SELECT, DELETE ON ALL TABLES IN SCHEMA public TO \(TestDatabase.runtimeRole)")
        let downstream = DownstreamStub()
        let server = try await TestPorts.serve { try await downstream.start(port: $0) }
        var statements = [
            "DELETE FROM app.profiles WHERE apple_sub = $1",
            "INSERT INTO app.purge_log (apple_sub, siwa_user_id, apple_team) VALUES ($1, $2, $3)",
        ]
        if slowSQL > 0 { statements.append("SELECT pg_sleep(\(slowSQL))") }
        var steps: [[String: Any]] = [["name": sqlStep, "sql": statements]]
        if analytics != nil {
            steps.append(["name": analyticsStep, "database_url_env": "TEST_ANALYTICS_DATABASE_URL",
                          "sql": ["DELETE FROM events WHERE apple_sub = $1"]])
        }
        steps.append(["name": httpStep, "http": ["url": server.baseURL + "/hooks/purge", "secret_env": "TEST_DOWNSTREAM_SECRET",
                                                 "timeout_seconds": httpTimeout]])
        if let planSteps { steps = planSteps(server.baseURL + "/hooks/purge") }
        let plan: [String: Any] = ["steps": steps]
        let planFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-plan-\(UUID().uuidString).json").path
        try JSONSerialization.data(withJSONObject: plan).write(to: URL(fileURLWithPath: planFile))
        var settings = [
            "SIWA_DATABASE_URL": database.workerURL,
            "SIWA_PURGE_PLAN": planFile,
            "TEST_DOWNSTREAM_SECRET": downstream.secret,
            "SIWA_JOB_LEASE_SECONDS": "2",
            "SIWA_JOB_RETRY_BASE_SECONDS": "0.05",
            "SIWA_WORKER_POLL_SECONDS": "0.5",
            "SIWA_LOG_LEVEL": "info",
        ]
        if let analytics { settings["TEST_ANALYTICS_DATABASE_URL"] = analytics.url }
        settings.merge(extra) { $1 }
        return WorkerHarness(database: database, downstream: downstream, downstreamServer: server, planFile: planFile, settings: settings)
    }

    private init(database: TestDatabase, downstream: DownstreamStub, downstreamServer: RunningServer, planFile: String, settings: [String: String]) {
        self.database = database
        self.downstream = downstream
        self.downstreamServer = downstreamServer
        self.planFile = planFile
        self.settings = settings
    }

    /// A `siwa worker` process (it starts working at once).
    func startWorker(_ extra: [String: String] = [:], journal: Bool = false) throws -> SIWAProcess {
        try SIWAProcess(environment: settings.merging(extra) { $1 }, arguments: ["worker"], journal: journal)
    }

    /// Enqueues purges by hand, the way an operator can: only kind and args.
    /// Each sub gets a users row with an email and an app profile.
    func enqueue(subs: [String]) async throws {
        let list = subs.map { "('\($0)')" }.joined(separator: ",")
        try await database.execute("""
            INSERT INTO siwa.users (apple_sub, apple_team, email) SELECT s, 'TEAM123456', s || '@privaterelay.appleid.com' FROM (VALUES \(list)) AS v(s);
            INSERT INTO app.profiles (apple_sub, display_name) SELECT s, 'Name of ' || s FROM (VALUES \(list)) AS v(s);
            INSERT INTO siwa.jobs (kind, args) SELECT 'purge_user', jsonb_build_object('apple_sub', s, 'apple_team', 'TEAM123456') FROM (VALUES \(list)) AS v(s);
            """)
    }

    func count(state: String) async throws -> Int {
        try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE state = '\(state)'")
    }

    /// Sessions of the worker's role on the harness's database.
    func workerSessions() async throws -> Int {
        try await database.scalar("""
            SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND usename = '\(TestDatabase.workerRole)'
            """)
    }

    /// Polls `condition` until it holds or `timeout` passes; returns whether it held.
    @discardableResult
    func wait(upTo timeout: Duration = .seconds(60), until condition: () async throws -> Bool) async throws -> Bool {
        try await eventually(upTo: timeout, condition)
    }

    func stop() async {
        await downstreamServer.stop()
        try? FileManager.default.removeItem(atPath: planFile)
    }
}

extension TestDatabase {
    /// How many sessions LISTEN for new jobs on this database (a `siwa
    /// worker`'s JobNotifier; PostgresNIO's statement): a job enqueued once
    /// a worker's is there wakes that worker at once.
    func jobListeners() async throws -> Int {
        try await superuserScalar("""
            SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND query = 'LISTEN "\(JobQueue.wakeChannel)";'
            """)
    }

    /// Runs a script of statements, one at a time, in one transaction.
    func execute(_ sql: String) async throws {
        try await withClient { client in
            try await client.withTransaction(logger: TestEnvironment.logger) { connection in
                for statement in SQLScript.statements(sql) {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: TestEnvironment.logger)
                }
            }
        }
    }
}
