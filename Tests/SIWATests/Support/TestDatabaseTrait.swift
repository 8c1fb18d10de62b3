import AccountStore
import Foundation
import PostgresNIO
import Synchronization
import Testing

/// `@Suite(.testDatabases)`: each test of the suite runs in a scope of its
/// own, which drops every database the test created (`TestDatabase.create`,
/// migrated as production is) and stops what it started (`TestScope.onExit`:
/// servers, workers, stubs), awaited, in reverse order, once the test ends,
/// whether it passed or threw. As swift-jobs-postgres' PostgresMigrations
/// trait, but a database per test rather than per suite: the tests of a
/// suite run in parallel, each against a database nobody else writes to.
struct TestDatabasesTrait: SuiteTrait, TestTrait, TestScoping {
    /// Every test of the suite gets its own scope (Swift Testing asks a
    /// recursive suite trait for each test case, not for the suite).
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        let scope = TestScope()
        do {
            try await TestScope.$current.withValue(scope) { try await function() }
        } catch {
            await scope.close()
            throw error
        }
        await scope.close()
    }
}

extension Trait where Self == TestDatabasesTrait {
    /// Databases made by the test are dropped, and what it started is stopped, when it ends.
    static var testDatabases: Self { TestDatabasesTrait() }
}

/// What one test made that must go when it ends (see TestDatabasesTrait).
final class TestScope: Sendable {
    @TaskLocal static var current: TestScope?

    private let cleanups = Mutex<[@Sendable () async -> Void]>([])

    /// Runs `cleanup` when the test ends, before what was registered earlier.
    func onExit(_ cleanup: @escaping @Sendable () async -> Void) {
        cleanups.withLock { $0.append(cleanup) }
    }

    /// The scope of the running test; a test outside one would leave its
    /// databases behind, so it is refused.
    static func required(for what: String) throws -> TestScope {
        guard let current else {
            throw TestSetupError("\(what) needs the test's scope: add .testDatabases to its @Suite (or @Test)")
        }
        return current
    }

    fileprivate func close() async {
        let all = cleanups.withLock { cleanups in
            defer { cleanups.removeAll() }
            return cleanups
        }
        for cleanup in all.reversed() { await cleanup() }
    }
}

extension TestDatabase {
    /// Drops the database, whoever is still connected, as the cluster's
    /// superuser (scripts/testdb.sh's `postgres`, trusted on loopback): the
    /// owner may not end the runtime role's sessions, and a worker killed a
    /// moment ago can still hold one. Three tries, each at most 20 s (a
    /// fault test's cluster may be on its way back up). False if it stayed.
    static func drop(_ name: String, server: DatabaseConfiguration) async -> Bool {
        guard let superuser = try? server.superuser(database: "postgres") else { return false }
        for attempt in 1...3 {
            let dropped = await withDeadline(.seconds(20)) {
                try await withClient(superuser) { client in
                    _ = try await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"),
                                               logger: TestEnvironment.logger)
                }
                return true
            }
            if dropped == true { return true }
            if attempt < 3 { try? await Task.sleep(for: .seconds(1)) }
        }
        return false
    }
}

/// Runs `cleanup` when the test ends, awaited (servers stopped, workers
/// killed) before the test's databases are dropped: what `defer { Task {
/// ... } }` meant, without a task nobody waits for.
func atTestEnd(_ cleanup: @escaping @Sendable () async -> Void) throws {
    try TestScope.required(for: "atTestEnd").onExit(cleanup)
}
