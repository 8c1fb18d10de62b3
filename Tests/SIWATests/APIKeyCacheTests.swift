import AccountStore
import Foundation
import PostgresNIO
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `/v1` keeps the keys it verified in memory (APIKeyCache) and hears of
/// every change by NOTIFY (sql/013's triggers): a revoke, a re-scope or a
/// delete, by `siwa api-keys` or by hand in SQL, is refused within moments
/// on a running `siwa serve`; a lost LISTEN turns the cache off.
@Suite("API key cache", .testDatabases, .timeLimit(.minutes(10)))
struct APIKeyCacheTests {
    /// How long a change may take to reach serve: a NOTIFY on loopback
    /// arrives in milliseconds; the bound only keeps a broken listener
    /// from hanging the test.
    static let noticeBound = Duration.seconds(5)

    @Test func changesByHandInSQLReachTheCacheAtOnce() async throws {
        let setup = try await SignInTests.Setup.start()
        try atTestEnd { await setup.server.stop() }
        let database = setup.server.database
        let path = "/v1/users/001.cache.0001"
        // Known and cached (404: the key opened the route; no such user).
        #expect(try await setup.get(path).status == 404)

        // The row changed with every trigger off (as only a superuser can):
        // the cached key still opens the route, which shows the cache is
        // what answers. A NOTIFY by hand then empties it.
        try await AuditChainTests.asSuperuser(database) {
            try await AuditChainTests.run($0, "UPDATE siwa.api_keys SET revoked_at = now() WHERE name = 'backend'")
        }
        #expect(try await setup.get(path).status == 404, "served from the cache")
        try await database.execute("NOTIFY siwa_api_keys")
        #expect(try await Self.refusedWithin(setup, path, key: setup.key, status: 401))

        // A second key, used, then re-scoped and deleted by plain SQL (the triggers on).
        let second = try await SignInFixture.apiKey(in: database, name: "second")
        #expect(try await setup.get(path, key: second).status == 404)
        try await database.execute("UPDATE siwa.api_keys SET scope = 'admin' WHERE name = 'second'")
        #expect(try await Self.refusedWithin(setup, path, key: second, status: 403))
        try await database.execute("UPDATE siwa.api_keys SET scope = 'app' WHERE name = 'second'")
        #expect(try await eventually(upTo: Self.noticeBound) { try await setup.get(path, key: second).status == 404 })
        try await database.execute("DELETE FROM siwa.api_keys WHERE name = 'second'")
        #expect(try await Self.refusedWithin(setup, path, key: second, status: 401))
    }

    /// The LISTEN connection killed: until it is back every request asks
    /// the database (a revoke in the gap is refused at once), and once it
    /// is back a revoke is heard again.
    @Test func aLostListenTurnsTheCacheOffUntilItIsBack() async throws {
        let setup = try await SignInTests.Setup.start()
        try atTestEnd { await setup.server.stop() }
        let database = setup.server.database
        let path = "/v1/users/001.cache.0002"
        let spare = try await SignInFixture.apiKey(in: database, name: "spare")
        #expect(try await setup.get(path).status == 404)
        #expect(try await setup.get(path, key: spare).status == 404)

        let killed = try await database.superuserScalar("""
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
            WHERE datname = current_database() AND query = 'LISTEN "siwa_api_keys";'
            """)
        #expect(killed == 1, "the listener's session was found and ended")
        // Revoked with the triggers off: nothing is announced, and nothing
        // needs to be, while the cache is off.
        try await AuditChainTests.asSuperuser(database) {
            try await AuditChainTests.run($0, "UPDATE siwa.api_keys SET revoked_at = now() WHERE name = 'spare'")
        }
        // serve learns of the ended session when its socket closes (moments
        // later on a loaded machine); well before the 30 s heartbeat bound.
        #expect(try await eventually(upTo: .seconds(5)) { try await setup.get(path, key: spare).status == 401 },
                "asked the database: the cache went off with its LISTEN")

        // Back within a second or two: a revoke is heard again.
        #expect(try await eventually(upTo: .seconds(10)) {
            try await database.superuserScalar("""
                SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN "siwa_api_keys";'
                """) == 1
        })
        #expect(try await setup.get(path).status == 404)
        try await database.withClient { client in
            _ = try await APIKeyAdministration(client: client, logger: TestEnvironment.logger).revoke(name: "backend", loginHint: nil)
        }
        #expect(try await Self.refusedWithin(setup, path, key: setup.key, status: 401))
    }

    /// The LISTEN connection dies without a word: its backend stopped
    /// (SIGSTOP), so the socket stays open and nothing arrives, no error
    /// and no close, as when a peer or a firewall drops the flow. A key
    /// revoked then (its NOTIFY never heard) is refused within the
    /// heartbeat's timeout; without the heartbeat the cache would keep
    /// serving it for its whole lifetime (300 s). Short intervals, so the
    /// test is quick.
    @Test func aSilentlyDeadListenTurnsTheCacheOffWithinTheHeartbeatTimeout() async throws {
        // A timeout a loaded machine keeps (a heartbeat answered late by seconds
        // would turn the cache off in the first part), short enough to be quick.
        let heartbeat = APIKeyCache.Heartbeat(interval: .milliseconds(500), timeout: .seconds(5))
        let fixture = try SignInFixture.files()
        let server = try await ServerHarness.start(signIn: fixture) { $0.apiKeyCacheHeartbeat = heartbeat }
        try atTestEnd { await server.stop() }
        let setup = SignInTests.Setup(server: server, fixture: fixture, key: try await SignInFixture.apiKey(in: server.database))
        let database = server.database
        let path = "/v1/users/001.cache.0003"
        let spare = try await SignInFixture.apiKey(in: database, name: "spare")
        #expect(try await setup.get(path).status == 404)
        #expect(try await setup.get(path, key: spare).status == 404)

        // A live LISTEN keeps the cache on through many timeouts: a key
        // revoked with the triggers off (nothing announced) is still served.
        try await Task.sleep(for: heartbeat.timeout * 3)
        try await AuditChainTests.asSuperuser(database) {
            try await AuditChainTests.run($0, "UPDATE siwa.api_keys SET revoked_at = now() WHERE name = 'spare'")
        }
        #expect(try await setup.get(path, key: spare).status == 404, "served from the cache: the heartbeats keep it on")
        try await database.execute("NOTIFY siwa_api_keys")
        #expect(try await Self.refusedWithin(setup, path, key: spare, status: 401))
        #expect(try await setup.get(path).status == 404, "cached again")

        let listenQuery = #"SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN "siwa_api_keys";'"#
        let listener = try await database.superuserScalar(listenQuery)
        #expect(listener > 0)
        #expect(kill(pid_t(listener), SIGSTOP) == 0, "the test runs as the cluster's owner or root")
        try atTestEnd { _ = kill(pid_t(listener), SIGCONT) }
        try await database.withClient { client in
            _ = try await APIKeyAdministration(client: client, logger: TestEnvironment.logger).revoke(name: "backend", loginHint: nil)
        }
        let revoked = ContinuousClock.now
        #expect(try await eventually(upTo: heartbeat.timeout + .seconds(3)) { try await setup.get(path).status == 401 },
                "refused once no heartbeat was heard for the timeout")
        #expect(ContinuousClock.now - revoked < heartbeat.timeout + .seconds(3))

        // The listener gave up the dead connection and LISTENs on a new one.
        #expect(try await eventually(upTo: .seconds(10)) {
            try await database.superuserScalar("SELECT count(*) FROM (\(listenQuery)) AS l WHERE pid <> \(listener)") == 1
        })
        _ = kill(pid_t(listener), SIGCONT)
    }

    static func refusedWithin(_ setup: SignInTests.Setup, _ path: String, key: String, status: Int) async throws -> Bool {
        try await eventually(upTo: noticeBound) { try await setup.get(path, key: key).status == status }
    }
}
