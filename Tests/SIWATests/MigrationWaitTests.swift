import Foundation
import Testing

/// An upgrade that brings a migration: serve and the worker started before
/// `siwa migrate` ran wait (a warning naming what is pending and what to
/// run), bind nothing and say nothing to systemd, then start once it ran.
/// A schema ahead of the binary stays fatal (exit status 2).
@Suite("Waiting for siwa migrate", .testDatabases, .timeLimit(.minutes(5)))
struct MigrationWaitTests {
    /// The repository's migrations plus one more, `999_pending`: the test
    /// database (migrated to the repository's) is one migration behind it.
    static func migrationsOneAhead() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let sql = TestEnvironment.repositoryRoot.appendingPathComponent("sql")
        for file in try FileManager.default.contentsOfDirectory(atPath: sql.path) where file.hasSuffix(".sql") {
            try FileManager.default.copyItem(at: sql.appendingPathComponent(file), to: dir.appendingPathComponent(file))
        }
        try "COMMENT ON SCHEMA siwa IS 'siwa: waited for';\n".write(to: dir.appendingPathComponent("999_pending.sql"),
                                                                   atomically: true, encoding: .utf8)
        return dir
    }

    @Test func serveWaitsForMigrateThenBecomesReady() async throws {
        let database = try await TestDatabase.create()
        let dir = try Self.migrationsOneAhead()
        try atTestEnd { try? FileManager.default.removeItem(at: dir) }
        let socket = try NotifySocket(abstract: false)
        let metricsPort = try TestPorts.free()
        let siwa = try SIWAProcess(port: try TestPorts.free(), metricsPort: metricsPort, environment: [
            "SIWA_DATABASE_URL": database.serveURL, "SIWA_APPLE_TEAM_ID": TestEnvironment.team,
            "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID, "SIWA_APPLE_JWKS_URL": "http://127.0.0.1:9/auth/keys",
            "SIWA_MIGRATIONS_DIR": dir.path, "NOTIFY_SOCKET": socket.address, "SIWA_ADMIN_HTTP_PORT": String(try TestPorts.free()),
        ])
        try atTestEnd { await siwa.kill9() }
        try await siwa.waitForLog("waiting for `siwa migrate`")
        try await siwa.waitForLog("waiting for `siwa migrate`", count: 2)
        #expect(siwa.log.contains("999_pending"), "\(siwa.log.suffix(2000))")
        #expect(siwa.log.contains("warning"), "\(siwa.log.suffix(2000))")
        // Waiting: not ready, `systemctl status` says what for, and no
        // listener serves (the public one binds after the check).
        #expect(try await eventually(upTo: .seconds(10)) {
            socket.received.contains { $0.contains("STATUS=Waiting for siwa migrate (pending: 999_pending") }
        }, "\(socket.received)")
        #expect(!socket.received.contains { $0.contains("READY=1") }, "\(socket.received)")
        let early = try? await HTTPAnswer.send(method: .GET, url: "http://127.0.0.1:\(siwa.port)/readyz", body: nil, headers: [],
                                               timeout: .seconds(2))
        #expect(early == nil, "the listener answered before the schema was up to date")
        // The metrics listener answers meanwhile: alive, not ready, and why, so
        // Kubernetes' probes wait for the migration instead of restarting serve.
        let metrics = "http://127.0.0.1:\(metricsPort)"
        let alive = try await HTTPAnswer.send(method: .GET, url: metrics + "/healthz", body: nil, headers: [], timeout: .seconds(5))
        #expect(alive.status == 200, "\(alive.status) \(alive.text)")
        let waiting = try await HTTPAnswer.send(method: .GET, url: metrics + "/readyz", body: nil, headers: [], timeout: .seconds(5))
        #expect(waiting.status == 503 && waiting.json["schema"] as? String == "waiting_for_migrate", "\(waiting.status) \(waiting.text)")

        let migrate = try await runSIWA(["migrate"], environment: [
            "SIWA_MIGRATE_DATABASE_URL": database.ownerURL, "SIWA_DATABASE_URL": database.url, "SIWA_MIGRATIONS_DIR": dir.path,
        ])
        #expect(migrate.status == 0, "\(migrate.output)")
        try await socket.waitFor("READY=1", timeout: .seconds(60))
        #expect(socket.received.last { $0.contains("READY=1") }?.contains("STATUS=serving") == true, "\(socket.received)")
        // Serving now (/readyz would wait for Apple's keys, which this test does not serve).
        let health = try await HTTPAnswer.send(method: .GET, url: "http://127.0.0.1:\(siwa.port)/healthz", body: nil, headers: [],
                                               timeout: .seconds(5))
        #expect(health.status == 200, "\(health.status) \(health.text)")
        let current = try await HTTPAnswer.send(method: .GET, url: metrics + "/readyz", body: nil, headers: [], timeout: .seconds(5))
        #expect(current.json["schema"] == nil, "\(current.status) \(current.text)")
        #expect(siwa.log.contains("The database schema is up to date: starting"), "\(siwa.log.suffix(2000))")
        #expect(await siwa.terminate() == 0)
    }

    @Test func theWorkerWaitsTooAndStopsCleanlyWhileWaiting() async throws {
        let database = try await TestDatabase.create()
        let dir = try Self.migrationsOneAhead()
        try atTestEnd { try? FileManager.default.removeItem(at: dir) }
        let socket = try NotifySocket(abstract: false)
        let worker = try SIWAProcess(environment: [
            "SIWA_DATABASE_URL": database.workerURL, "SIWA_MIGRATIONS_DIR": dir.path, "NOTIFY_SOCKET": socket.address,
        ], arguments: ["worker"])
        try atTestEnd { await worker.kill9() }
        try await worker.waitForLog("waiting for `siwa migrate`")
        #expect(try await eventually(upTo: .seconds(10)) {
            socket.received.contains { $0.contains("STATUS=Waiting for siwa migrate (pending: 999_pending") }
        }, "\(socket.received)")
        #expect(!worker.log.contains("Worker started"), "\(worker.log.suffix(2000))")
        #expect(!socket.received.contains { $0.contains("READY=1") }, "\(socket.received)")
        // SIGTERM while waiting: a clean stop, nothing claimed.
        #expect(await worker.terminate() == 0, "\(worker.log.suffix(2000))")
    }

    /// A database migrated by a newer siwa: no wait fixes that.
    @Test func aSchemaAheadOfTheBinaryStaysFatal() async throws {
        let database = try await TestDatabase.create()
        let dir = try Self.migrationsOneAhead()
        try atTestEnd { try? FileManager.default.removeItem(at: dir) }
        let migrate = try await runSIWA(["migrate"], environment: [
            "SIWA_MIGRATE_DATABASE_URL": database.ownerURL, "SIWA_DATABASE_URL": database.url, "SIWA_MIGRATIONS_DIR": dir.path,
        ])
        #expect(migrate.status == 0, "\(migrate.output)")
        let result = try await runSIWA(["worker"], environment: ["SIWA_DATABASE_URL": database.workerURL])
        #expect(result.status == 2, "\(result.output)")
        #expect(result.output.contains("999_pending") && result.output.contains("older binary"), "\(result.output)")
    }
}
