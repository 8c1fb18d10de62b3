import AccountStore
import Foundation
import Logging
import PostgresNIO
import Testing

/// Where the throwaway PostgreSQL clusters are (`make test` starts them with
/// scripts/testdb.sh and passes their URLs).
enum TestEnvironment {
    static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func require(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
            throw TestSetupError("\(name) is not set: run the suite with `make test`, which starts PostgreSQL")
        }
        return value
    }

    static var databaseURL: String { get throws { try require("SIWA_TEST_DATABASE_URL") } }
    static var faultDatabaseURL: String { get throws { try require("SIWA_TEST_FAULT_DATABASE_URL") } }
    static var pgScript: String {
        ProcessInfo.processInfo.environment["SIWA_TEST_PG_SCRIPT"]
            ?? repositoryRoot.appendingPathComponent("scripts/testdb.sh").path
    }

    /// The `siwa` executable built by `swift build` (make test builds it first).
    static var siwaBinary: URL {
        get throws {
            let url = repositoryRoot.appendingPathComponent(".build/debug/siwa")
            guard FileManager.default.isExecutableFile(atPath: url.path) else {
                throw TestSetupError("\(url.path) is missing: run `swift build` first (make test does)")
            }
            return url
        }
    }

    static let logger: Logger = {
        var logger = Logger(label: "siwa.tests")
        logger.logLevel = .warning
        return logger
    }()
}

struct TestSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A fresh, migrated database of its own for one test (or suite), in the
/// shared throwaway cluster, so tests run in parallel without interfering.
struct TestDatabase: Sendable {
    let url: String
    let configuration: DatabaseConfiguration

    static func create(serverURL: String? = nil) async throws -> TestDatabase {
        let server = try DatabaseConfiguration(url: try serverURL ?? TestEnvironment.databaseURL)
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        try await withClient(server) { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: TestEnvironment.logger)
        }
        let configuration = server.with(database: String(name))
        let migrator = try Migrator(directory: TestEnvironment.repositoryRoot.appendingPathComponent("sql"))
        try await withClient(configuration) { client in
            try await migrator.migrate(client: client, logger: TestEnvironment.logger)
        }
        let base = try TestEnvironment.require(serverURL == nil ? "SIWA_TEST_DATABASE_URL" : "SIWA_TEST_FAULT_DATABASE_URL")
        var components = URLComponents(string: base)!
        components.path = "/\(name)"
        let url = components.string!
        return TestDatabase(url: url, configuration: configuration)
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

    func strings(_ sql: String) async throws -> [String] {
        try await withClient { client in
            var result: [String] = []
            let rows = try await client.query(PostgresQuery(unsafeSQL: sql), logger: TestEnvironment.logger)
            for try await value in rows.decode(String.self) { result.append(value) }
            return result
        }
    }
}
