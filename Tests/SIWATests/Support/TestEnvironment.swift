import AccountStore
import Foundation
import Logging
import PostgresNIO
import Testing

/// Where the throwaway PostgreSQL clusters are (`make test` starts them with
/// scripts/testdb.sh and passes their URLs).
enum TestEnvironment {
    /// The developer team of the tests' users, notifications and sign-ins
    /// (SIWA_APPLE_TEAM_ID; the sign-in fixture's key is this team's).
    static let team = "TEAM123456"

    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func require(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
            throw TestSetupError("\(name) is not set: run the suite with `make test`, which starts PostgreSQL")
        }
        return value
    }

    /// Running under CI (`.ci/run` is started with CI=true): tests that a
    /// developer's machine may skip for a missing tool must run there.
    static var isCI: Bool {
        let value = ProcessInfo.processInfo.environment["CI"] ?? ""
        return !value.isEmpty && value != "0" && value != "false"
    }

    static var databaseURL: String { get throws { try require("SIWA_TEST_DATABASE_URL") } }
    static var faultDatabaseURL: String { get throws { try require("SIWA_TEST_FAULT_DATABASE_URL") } }
    static var pgScript: String {
        ProcessInfo.processInfo.environment["SIWA_TEST_PG_SCRIPT"]
            ?? repositoryRoot.appendingPathComponent("scripts/testdb.sh").path
    }

    /// The `siwa` executable built by `swift build` (make test builds it first).
    static var siwaBinary: URL {
        get throws { try builtBinary("siwa") }
    }

    /// An executable of the package built by `swift build` (make test builds them all first).
    static func builtBinary(_ name: String) throws -> URL {
        let url = repositoryRoot.appendingPathComponent(".build/debug/\(name)")
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw TestSetupError("\(url.path) is missing: run `swift build` first (make test does)")
        }
        return url
    }

    /// The erasure ledger of every `siwa worker` a test starts, unless the
    /// test gives its own (SIWA_ERASURE_LEDGER_DIR; the default,
    /// /var/lib/siwa/erasures, is production's).
    static let erasureLedgerDirectory = FileManager.default.temporaryDirectory
        .appendingPathComponent("siwa-test-erasures-\(ProcessInfo.processInfo.processIdentifier)").path

    static let logger: Logger = {
        var logger = Logger(label: "siwa.tests")
        logger.logLevel = .warning
        return logger
    }()
}

/// Polls `condition` until it holds or `timeout` passes; returns whether it
/// held. For effects that land after the answer (batched writers, workers).
@discardableResult
func eventually(upTo timeout: Duration = .seconds(60), _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(50))
    }
    return try await condition()
}

struct TestSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A fresh, migrated database of its own for one test, in the shared
/// throwaway cluster, so tests run in parallel without interfering; dropped
/// when the test ends (the suite's `.testDatabases` trait).
///
/// As in production, the schema belongs to the owner role (`siwa`, which
/// migrates it) and serve and worker run as runtime roles of their own
/// (`siwa_serve`, `siwa_worker`, each granted its process's privileges by
/// the migration step): `serveURL` is the one to give `siwa serve` (or an
/// in-process server), `workerURL` the one for `siwa worker` and `siwa
/// tokens`. `url` is the one-role trial's (`siwa_app`, granted both sets),
/// for commands run as "the runtime role". `configuration` (the owner's)
/// sets up fixtures and reads results.
struct TestDatabase: Sendable {
    /// The one-role trial's runtime role (scripts/testdb.sh creates it).
    static let runtimeRole = "siwa_app"
    /// serve's and the worker's roles, and the purge plan's (scripts/testdb.sh).
    static let serveRole = "siwa_serve"
    static let workerRole = "siwa_worker"
    static let purgeRole = "siwa_purge"

    /// The one-role trial's URL: serve's and the worker's privileges at once.
    let url: String
    /// The owner's URL (SIWA_MIGRATE_DATABASE_URL).
    let ownerURL: String
    let configuration: DatabaseConfiguration
    /// serve's role's URL (serve.env's SIWA_DATABASE_URL).
    var serveURL = ""
    /// The worker's role's URL (worker.env's SIWA_DATABASE_URL).
    var workerURL = ""

    static func create(serverURL: String? = nil) async throws -> TestDatabase {
        let server = try DatabaseConfiguration(url: try serverURL ?? TestEnvironment.databaseURL)
        let (name, configuration) = try await createEmpty(on: server)
        let migrator = try Migrator(directory: TestEnvironment.repositoryRoot.appendingPathComponent("sql"))
        try await withClient(configuration) { client in
            try await migrator.migrate(client: client, logger: TestEnvironment.logger)
            try await RuntimeRole.grant(to: runtimeRole, client: client, logger: TestEnvironment.logger)
            try await RuntimeRole.grant(to: serveRole, for: [.serve], client: client, logger: TestEnvironment.logger)
            try await RuntimeRole.grant(to: workerRole, for: [.worker], client: client, logger: TestEnvironment.logger)
        }
        let base = try TestEnvironment.require(serverURL == nil ? "SIWA_TEST_DATABASE_URL" : "SIWA_TEST_FAULT_DATABASE_URL")
        guard var components = URLComponents(string: base) else { throw TestSetupError("\(base) is not a URL") }
        components.path = "/\(name)"
        let ownerURL = components.string ?? base
        func url(of role: String) -> String {
            var roleComponents = components
            roleComponents.user = role
            roleComponents.password = role
            return roleComponents.string ?? base
        }
        return TestDatabase(url: url(of: runtimeRole), ownerURL: ownerURL, configuration: configuration,
                            serveURL: url(of: serveRole), workerURL: url(of: workerRole))
    }

    /// A database with nothing in it (not migrated) on `server`, dropped
    /// when the test ends (`.testDatabases`); its name starts with `prefix`.
    static func createEmpty(on server: DatabaseConfiguration, prefix: String = "t_") async throws
        -> (name: String, configuration: DatabaseConfiguration) {
        let scope = try TestScope.required(for: "TestDatabase.create")
        let name: String = prefix + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        try await withClient(server) { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: TestEnvironment.logger)
        }
        scope.onExit {
            if await !drop(name, server: server) { Issue.record("test database \(name) could not be dropped: it is left behind") }
        }
        return (name, server.with(database: name))
    }

    /// The one-role trial's view of this database, for tests of its privileges.
    var runtimeConfiguration: DatabaseConfiguration {
        get throws { try DatabaseConfiguration(url: url) }
    }
    /// serve's role's view: what the receiver, sign-in and the admin listener may do.
    var serveConfiguration: DatabaseConfiguration {
        get throws { try DatabaseConfiguration(url: serveURL) }
    }
    /// The worker's role's view: what the queue, the purge and the sealer may do.
    var workerConfiguration: DatabaseConfiguration {
        get throws { try DatabaseConfiguration(url: workerURL) }
    }

    @discardableResult
    func withClient<T: Sendable>(_ body: (PostgresClient) async throws -> T) async throws -> T {
        try await Self.withClient(configuration, body)
    }

    @discardableResult
    static func withClient<T: Sendable>(_ configuration: DatabaseConfiguration, _ body: (PostgresClient) async throws -> T) async throws -> T {
        var config = configuration
        config.tls = .disable
        return try await config.withClient(body)
    }

    /// One integer from a query (counts, mostly).
    func scalar(_ sql: String) async throws -> Int {
        try await withClient { client in
            let rows = try await client.query(PostgresQuery(unsafeSQL: sql), logger: TestEnvironment.logger)
            for try await value in rows.decode(Int.self) { return value }
            return 0
        }
    }

    /// One integer from a query run as the cluster's superuser (what only
    /// it may see or do: other roles' sessions, ending them).
    func superuserScalar(_ sql: String) async throws -> Int {
        return try await Self.withClient(try configuration.superuser()) { client in
            let rows = try await client.query(PostgresQuery(unsafeSQL: sql), logger: TestEnvironment.logger)
            for try await value in rows.decode(Int.self) { return value }
            return 0
        }
    }

    func strings(_ sql: String) async throws -> [String] {
        try await withClient { client in
            var result: [String] = []
            let rows = try await client.query(PostgresQuery(unsafeSQL: sql), logger: TestEnvironment.logger)
            for try await value in rows.decode(String.self) { result.append(value) }
            return result
        }
    }
}

extension DatabaseConfiguration {
    /// The cluster's superuser (`postgres`, trusted on loopback by
    /// scripts/testdb.sh) on the same server, in `database` (this
    /// configuration's database unless named): what only it may see or do.
    func superuser(database: String? = nil) throws -> DatabaseConfiguration {
        try DatabaseConfiguration(url: "postgres://postgres@\(host):\(port)/\(database ?? self.database)?sslmode=disable")
    }
}
