import AccountStore
import AppleSimulator
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import SIWAServer
import ServiceLifecycle
import Testing

/// `APIKeyMiddleware` over real HTTP: 401 for any key that is not live,
/// the key's identity for the route, 503 (never 500) when the database
/// cannot answer.
@Suite("API key middleware", .testDatabases)
struct APIKeyMiddlewareTests {
    /// A `/v1/whoami` route behind the middleware, on a free loopback port,
    /// for as long as `body` runs.
    static func withServer(verifier: APIKeyVerifier, _ body: (String) async throws -> Void) async throws {
        _ = quietLogging
        let router = Router(context: BasicRequestContext.self)
        router.group("v1", context: APIKeyContext.self)
            .add(middleware: APIKeyMiddleware(verifier: verifier))
            .get("whoami") { _, context in "\(context.apiKey?.id ?? 0) \(context.apiKey?.name ?? "none")" }
        // Stopped gracefully (RunningServer.stop), never by cancelling its task.
        let server = try await TestPorts.serve { try await RunningServer.start(router: router, port: $0, logger: Logger(label: "siwa.test-api-keys")) }
        do {
            try await body("http://127.0.0.1:\(server.port)/v1/whoami")
            await server.stop()
        } catch {
            await server.stop()
            throw error
        }
    }

    static func get(_ url: String, authorization: String?) async throws -> HTTPAnswer {
        try await HTTPAnswer.send(method: .GET, url: url, body: nil, headers: authorization.map { [("Authorization", $0)] } ?? [])
    }

    @Test func onlyALiveKeyGetsThroughAndTheRouteSeesWhichKey() async throws {
        let database = try await TestDatabase.create()
        let (key, row) = try await TestDatabase.withClient(database.configuration) { client in
            try await APIKeyAdministration(client: client, logger: TestEnvironment.logger).create(name: "backend", loginHint: nil)
        }
        try await TestDatabase.withClient(try database.serveConfiguration) { client in
            try await Self.withServer(verifier: APIKeyVerifier(client: client, logger: TestEnvironment.logger)) { url in
                let ok = try await Self.get(url, authorization: "Bearer \(key)")
                #expect(ok.status == 200 && ok.text == "\(row.id) backend", "\(ok.status) \(ok.text)")
                #expect(try await Self.get(url, authorization: "bearer \(key)").status == 200)

                let wrongSecret = String(key.dropLast()) + (key.last == "A" ? "B" : "A")
                var texts = Set<String>()
                for authorization in [nil, "", "Bearer", "Bearer ", "Basic \(key)", key, "Bearer \(wrongSecret)", "Bearer siwa_nope"] {
                    let refused = try await Self.get(url, authorization: authorization)
                    #expect(refused.status == 401, "\(authorization ?? "nil")")
                    #expect(refused.text.hasPrefix(#"{"error":"unauthorized","detail":"#))
                    texts.insert(refused.text)
                    #expect(refused.headers["WWW-Authenticate"] == ["Bearer"])
                }
                #expect(texts.count == 1, "the same answer for each refusal: it tells a prober nothing")

                try await TestDatabase.withClient(database.configuration) { owner in
                    _ = try await APIKeyAdministration(client: owner, logger: TestEnvironment.logger).revoke(name: "backend", loginHint: nil)
                }
                #expect(try await Self.get(url, authorization: "Bearer \(key)").status == 401)
            }
        }
    }

    /// An admin key opens the admin listener only: 403 on /v1.
    @Test func anAdminKeyIsForbiddenOnV1() async throws {
        let database = try await TestDatabase.create()
        let (key, _) = try await TestDatabase.withClient(database.configuration) { client in
            try await APIKeyAdministration(client: client, logger: TestEnvironment.logger).create(name: "ops", scope: .admin, loginHint: nil)
        }
        try await TestDatabase.withClient(try database.serveConfiguration) { client in
            try await Self.withServer(verifier: APIKeyVerifier(client: client, logger: TestEnvironment.logger)) { url in
                let answer = try await Self.get(url, authorization: "Bearer \(key)")
                #expect(answer.status == 403 && answer.reason == "forbidden", "\(answer.status) \(answer.text)")
            }
        }
    }

    @Test func aDatabaseErrorWhileCheckingIs503NotA500() async throws {
        // The runtime role on a database without siwa's schema: the lookup fails.
        let database = try await TestDatabase.create()
        var elsewhere = try database.serveConfiguration.with(database: "postgres")
        elsewhere.tls = .disable
        let key = "siwa_abcdefghijkl_" + String(repeating: "A", count: 43)
        try await elsewhere.withClient { client in
            try await Self.withServer(verifier: APIKeyVerifier(client: client, logger: TestEnvironment.logger)) { url in
                let answer = try await Self.get(url, authorization: "Bearer \(key)")
                #expect(answer.status == 503, "\(answer.status) \(answer.text)")
                #expect(answer.text.hasPrefix(#"{"error":"unavailable","detail":"#))
                #expect(answer.headers["Retry-After"] == ["5"])
                // A malformed key needs no database: still 401.
                #expect(try await Self.get(url, authorization: "Bearer nope").status == 401)
            }
        }
    }
}
