import AppleSimulator
import Foundation
import NIOHTTP1
import SIWAClient
import Testing

/// `/v1` has a listener of its own (SIWA_API_HTTP_HOST, SIWA_API_HTTP_PORT),
/// which the app's backend reaches over loopback or the private network.
/// The public listener, the one the reverse proxy exposes to the internet,
/// answers `/v1` 404 even with a valid key and a valid request, and calls
/// neither Apple nor the database for it, and has no `/metrics` either: it
/// serves only Apple's notifications, health and the receipts' key set. The
/// API listener has only `/v1`; the metrics listener only `/metrics` and
/// health. The public listener is asked with raw requests (what a stranger
/// sends); the API listener through SIWAClient, as an app's backend asks it.
@Suite("API listener", .testDatabases)
struct APIListenerTests {
    @Test func v1IsOnTheAPIListenerOnlyAndNothingElseIsThere() async throws {
        let setup = try await SignInTests.Setup.start()
        try atTestEnd { await setup.server.stop() }
        let server = setup.server, database = server.database
        let auth = [("Content-Type", "application/json"), ("Authorization", "Bearer \(setup.key)")]
        #expect(server.apiPort != nil && server.apiPort != server.port)

        // A valid sign-in on the public listener: 404, and Apple is never called.
        let body = try JSONSerialization.data(withJSONObject: try setup.appleSignIn(sub: "001.public.0001"))
        let onPublic = try await HTTPAnswer.send(method: .POST, url: server.baseURL + "/v1/sign-in", body: body, headers: auth)
        #expect(onPublic.status == 404, "\(onPublic.status) \(onPublic.text)")
        #expect(setup.apple.issuedRefreshTokens.isEmpty, "the public listener called Apple for /v1")
        #expect(try await database.scalar("SELECT count(*) FROM siwa.users") == 0)

        // A backend's client pointed at the public listener by mistake is
        // told so: a 404 that is not siwa's API answer.
        let misdirected = try SIWAClient.forTests(apiURL: server.baseURL, key: setup.key)
        await #expect(throws: SIWAClientError.self) { _ = try await misdirected.user(appleSub: "001.public.0001") }

        // The same request on the API listener signs the user in.
        let onAPI = try await setup.client().signIn(json: try JSONSerialization.jsonObject(with: body) as? [String: Any] ?? [:])
        #expect(onAPI.status == 200, "\(onAPI.text)")
        #expect(try await setup.lookup("001.public.0001").value?.user?.appleSub == "001.public.0001")

        // An existing user, asked for or deleted on the public listener: 404, nothing changes.
        for method in [HTTPMethod.GET, .DELETE] {
            let answer = try await HTTPAnswer.send(method: method, url: server.baseURL + "/v1/users/001.public.0001", body: nil,
                                                   headers: auth)
            #expect(answer.status == 404, "\(method) on the public listener: \(answer.status) \(answer.text)")
            #expect(answer.reason == nil, "Hummingbird's 404, not the API's: \(answer.text)")
        }
        #expect(try await database.strings("SELECT status FROM siwa.users WHERE apple_sub = '001.public.0001'") == ["active"])
        #expect(try await database.scalar("SELECT count(*) FROM siwa.jobs") == 0)

        // Apple's notifications: recorded on the public listener, 404 on the API listener.
        let token = try server.notification("email-disabled", sub: "001.public.0001")
        let refused = try await HTTPAnswer.send(method: .POST, url: server.apiURL + "/apple/notifications",
                                                body: AppleSimulator.body(for: token), headers: [("Content-Type", "application/json")])
        #expect(refused.status == 404, "\(refused.status) \(refused.text)")
        #expect(try await database.scalar("SELECT count(*) FROM siwa.notifications") == 0)
        #expect(try await server.post(token: token).status == 200)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.notifications") == 1)

        // A path of the API's with a method it does not take: 405 with the
        // methods it does, before any key is asked for; nothing changes.
        for (method, path, allowed) in [(HTTPMethod.PUT, "/v1/users/001.public.0001", "DELETE, GET"), (.GET, "/v1/sign-in", "POST"),
                                        (.POST, "/v1/users/001.public.0001/extra", "")] {
            let answer = try await HTTPAnswer.send(method: method, url: server.apiURL + path, body: nil, headers: [])
            if allowed.isEmpty {
                #expect(answer.status == 404, "\(method) \(path): \(answer.status)")
                continue
            }
            #expect(answer.status == 405 && answer.reason == "method_not_allowed", "\(method) \(path): \(answer.status) \(answer.text)")
            #expect(answer.headers.first(name: "Allow") == allowed, "\(method) \(path)")
        }
        #expect(try await database.strings("SELECT status FROM siwa.users WHERE apple_sub = '001.public.0001'") == ["active"])

        // Health, metrics, the receipts' key set and the admin's routes: not on the API listener.
        for path in ["/healthz", "/readyz", "/metrics", "/.well-known/siwa-receipts.json", "/admin", "/"] {
            let answer = try await HTTPAnswer.send(method: .GET, url: server.apiURL + path, body: nil, headers: [])
            #expect(answer.status == 404, "GET \(path) on the API listener: \(answer.status)")
        }
        #expect(try await server.get("/healthz").status == 200)

        // /metrics: on the metrics listener, not on the public one; the
        // metrics listener has health too, and nothing else.
        #expect(try await server.get("/metrics").status == 404)
        let metrics = try await server.getMetrics()
        #expect(metrics.status == 200 && metrics.text.contains("siwa_build_info{"), "\(metrics.status)")
        for path in ["/healthz", "/readyz"] {
            let answer = try await HTTPAnswer.send(method: .GET, url: server.metricsURL + path, body: nil, headers: [])
            #expect(answer.status == 200, "GET \(path) on the metrics listener: \(answer.status)")
        }
        let onMetrics = try await HTTPAnswer.send(method: .POST, url: server.metricsURL + "/apple/notifications",
                                                  body: AppleSimulator.body(for: try server.notification("email-enabled", sub: "001.public.0001")),
                                                  headers: [("Content-Type", "application/json")])
        #expect(onMetrics.status == 404, "\(onMetrics.status)")
        for path in ["/v1/users/001.public.0001", "/.well-known/siwa-receipts.json", "/admin"] {
            let answer = try await HTTPAnswer.send(method: .GET, url: server.metricsURL + path, body: nil, headers: auth)
            #expect(answer.status == 404, "GET \(path) on the metrics listener: \(answer.status)")
        }
        #expect(try await database.scalar("SELECT count(*) FROM siwa.notifications") == 1)
    }

    /// SIWA_API_HTTP_PORT=off with sign-in on: no API listener, and still
    /// no `/v1` on the public one.
    @Test func offLeavesNoV1Anywhere() async throws {
        let setup = try await SignInTests.Setup.start(settings: ["SIWA_API_HTTP_PORT": "off"])
        try atTestEnd { await setup.server.stop() }
        #expect(setup.server.apiPort == nil)
        let answer = try await HTTPAnswer.send(method: .GET, url: setup.server.baseURL + "/v1/users/001.off.0001", body: nil,
                                               headers: [("Authorization", "Bearer \(setup.key)")])
        #expect(answer.status == 404)
        #expect(try await setup.server.get("/readyz").status == 200)
    }
}
