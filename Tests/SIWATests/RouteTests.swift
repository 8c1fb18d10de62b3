import AccountStore
import AppleSignIn
import AppleSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import SIWAServer
import Testing

/// `siwa serve`'s answers where the socket proves nothing, through
/// Hummingbird's router test client: the application as ServerAssembly
/// builds it (its services running: the database client, the key refresh
/// from the Apple simulator), with no listener. What the connection does
/// (idle timeouts, floods, `Connection: close`) stays on real sockets, in
/// HTTPHygieneTests.
@Suite("Routes", .testDatabases)
struct RouteTests {
    /// The application `siwa serve` runs, against a database of its own and the simulator.
    static func withApplication(settings extra: [String: String] = [:],
                                _ body: @escaping @Sendable (any TestClientProtocol, TestDatabase) async throws -> Void) async throws {
        _ = quietLogging
        let simulator = try AppleSimulator()
        let appleServer = try await TestPorts.serve { try await simulator.start(port: $0) }
        try atTestEnd { await appleServer.stop() }
        let database = try await TestDatabase.create()
        let settings = try ServerHarness.settings(database: database, simulator: simulator, appleBaseURL: appleServer.baseURL,
                                                  extra: extra)
        let app = try ServerAssembly.makeApplication(
            settings: settings,
            migrations: try Migrator(directory: TestEnvironment.repositoryRoot.appendingPathComponent("sql")),
            logger: Logger(label: "siwa.test-server"))
        try await app.test(.router) { client in try await body(client, database) }
    }

    @Test func healthAndReadiness() async throws {
        try await Self.withApplication { client, _ in
            let health = try await client.execute(uri: "/healthz", method: .get)
            #expect(health.status == .ok && String(buffer: health.body) == #"{"status":"ok"}"#)
            #expect(health.headers[.cacheControl] == "no-store")
            // Ready once Apple's keys are loaded (the key refresh runs as a service of the app).
            var ready = try await client.execute(uri: "/readyz", method: .get)
            let deadline = ContinuousClock.now + .seconds(15)
            while ready.status != .ok, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
                ready = try await client.execute(uri: "/readyz", method: .get)
            }
            #expect(ready.status == .ok, "\(String(buffer: ready.body))")
            #expect(String(buffer: ready.body) == #"{"status":"ready","database":"ok","apple_keys":"loaded"}"#)
        }
    }

    /// Not ready while Apple's keys cannot be loaded: 503, and says which part is missing.
    @Test func notReadyWithoutApplesKeys() async throws {
        try await Self.withApplication(settings: ["SIWA_APPLE_JWKS_URL": "http://127.0.0.1:9/auth/keys"]) { client, _ in
            let ready = try await client.execute(uri: "/readyz", method: .get)
            #expect(ready.status == .serviceUnavailable)
            #expect(String(buffer: ready.body) == #"{"status":"not_ready","database":"ok","apple_keys":"not_loaded"}"#)
            #expect(try await client.execute(uri: "/healthz", method: .get).status == .ok)
        }
    }

    /// Paths siwa does not serve, the admin's among them (they live on the
    /// admin listener only): 404. A path siwa serves, asked with a method it
    /// does not take: 405 with `Allow`. Nothing written either way.
    @Test func unknownPathsAreNotFoundAndOtherMethodsNotAllowed() async throws {
        try await Self.withApplication { client, database in
            for path in ["/", "/nope", "/admin", "/admin/jobs", "/admin/audit", "/v1/users/001.x.0001", "/apple/notifications/x",
                         "/metrics"] {
                let answer = try await client.execute(uri: path, method: .get)
                #expect(answer.status == .notFound, "GET \(path): \(answer.status)")
                #expect(answer.headers[.allow] == nil)
            }
            for (method, path, allowed) in [(HTTPRequest.Method.get, "/apple/notifications", "POST"), (.put, "/apple/notifications", "POST"),
                                            (.delete, "/apple/notifications", "POST"), (.post, "/healthz", "GET"), (.delete, "/readyz", "GET"),
                                            (.post, "/.well-known/siwa-receipts.json", "GET")] {
                let answer = try await client.execute(uri: path, method: method, body: ByteBuffer(string: "{}"))
                #expect(answer.status == .methodNotAllowed, "\(method) \(path): \(answer.status)")
                #expect(answer.headers[.allow] == allowed, "\(method) \(path)")
                #expect(answer.headers[.contentType] == "application/json; charset=utf-8")
                #expect(String(buffer: answer.body) == #"{"error":"method_not_allowed","detail":"This path answers \#(allowed) only."}"#)
            }
            #expect(try await database.scalar("SELECT count(*) FROM siwa.notifications") == 0)
            #expect(try await database.scalar("SELECT count(*) FROM siwa.rejected_notifications") == 0)
        }
    }

    /// The deletion receipts' public key set: published with a cache
    /// lifetime when serve has one, 404 with a reason when it has none.
    @Test func receiptKeysArePublishedOr404() async throws {
        let keys = try await ReceiptFixture.make()
        try atTestEnd { keys.remove() }
        try await Self.withApplication(settings: keys.serverSettings) { client, _ in
            let published = try await client.execute(uri: "/.well-known/siwa-receipts.json", method: .get)
            #expect(published.status == .ok && published.headers[.contentType] == "application/json; charset=utf-8")
            #expect(published.headers[.cacheControl] == "public, max-age=3600")
            #expect(try ES256KeySet(jwks: Data(published.body.readableBytesView)).json() == (try ES256KeySet.load(path: keys.jwksFile)).json())
        }
        try await Self.withApplication { client, _ in
            let missing = try await client.execute(uri: "/.well-known/siwa-receipts.json", method: .get)
            #expect(missing.status == .notFound)
            #expect(String(buffer: missing.body).hasPrefix(#"{"error":"not_found","detail":"#), "\(String(buffer: missing.body))")
        }
    }
}
