import AppleSimulator
import Foundation
import NIOHTTP1
import SIWAServer
import Testing

/// What an operator sees of one request: its `X-Request-Id` on every
/// listener's answers (the caller's when sane, else one siwa makes), and
/// `/metrics` after real `/v1` calls and real calls to Apple (the simulator).
@Suite("Request ids and serve's metrics", .testDatabases, .timeLimit(.minutes(10)))
struct RequestIDTests {
    @Test(arguments: [
        ("abc-123", true), ("4f1c2a8e-6b0d-4c55-9a55-0d6f3c1e2b7a", true), ("Root=1-5759e988-bd862e3f:a/b+c.d_e", true),
        (String(repeating: "a", count: 64), true), (String(repeating: "a", count: 65), false), ("", false), ("has space", false),
        ("<script>", false), ("tab\tid", false), ("é", false), ("a,b", false), ("a\"b", false),
    ])
    func aSaneIDIsBoundedVisibleASCII(_ id: String, _ sane: Bool) {
        #expect((RequestIDHeader.sane(id) != nil) == sane, "\(id)")
    }

    @Test func everyListenerAnswersWithARequestID() async throws {
        let setup = try await SignInTests.Setup.start(settings: ["SIWA_ADMIN_HTTP_PORT": "0"])
        try atTestEnd { await setup.server.stop() }
        let server = setup.server
        let admin = "http://127.0.0.1:\(try #require(server.adminPort))"
        func id(_ method: HTTPMethod, _ url: String, _ given: String?, body: Data? = nil, status: Int) async throws -> String {
            var headers = [("Content-Type", "application/json"), ("Authorization", "Bearer \(setup.key)")]
            if let given { headers.append(("X-Request-Id", given)) }
            let answer = try await HTTPAnswer.send(method: method, url: url, body: body, headers: headers)
            #expect(answer.status == status, "\(method) \(url): \(answer.status) \(answer.text)")
            let ids = answer.headers[canonicalForm: "X-Request-Id"].map(String.init)
            #expect(ids.count == 1, "\(method) \(url): \(ids)")
            return ids.first ?? ""
        }
        let token = try server.notification("email-disabled", sub: "001.rid.0001")
        let cases: [(HTTPMethod, String, Data?, Int)] = [
            (.GET, server.baseURL + "/healthz", nil, 200),
            (.GET, server.metricsURL + "/metrics", nil, 200),
            (.GET, server.metricsURL + "/nothing", nil, 404),
            (.GET, server.baseURL + "/no-such-route", nil, 404),
            (.POST, server.baseURL + "/apple/notifications", AppleSimulator.body(for: token), 200),
            (.POST, server.baseURL + "/apple/notifications", Data("{".utf8), 400),
            (.GET, server.apiURL + "/v1/users/001.rid.none", nil, 404),
            (.GET, server.apiURL + "/v1/nothing", nil, 404),
            (.GET, admin + "/nothing", nil, 404),
        ]
        var made: Set<String> = []
        for (method, url, body, status) in cases {
            // The caller's own, echoed.
            #expect(try await id(method, url, "ops-\(made.count)", body: body, status: status) == "ops-\(made.count)")
            // None, or one that is not sane: siwa's own, sane, a new one each time.
            for given in [nil, "no spaces allowed", String(repeating: "x", count: 65)] {
                let generated = try await id(method, url, given, body: body, status: status)
                #expect(RequestIDHeader.sane(generated) == generated && generated != given, "\(url): \(generated)")
                #expect(made.insert(generated).inserted, "\(url): \(generated) given twice")
            }
        }
        // A key refused on /v1: the answer still carries it.
        let refused = try await HTTPAnswer.send(method: .GET, url: server.apiURL + "/v1/users/001.rid.none", body: nil,
                                                headers: [("Authorization", "Bearer wrong"), ("X-Request-Id", "refused-1")])
        #expect(refused.status == 401 && refused.headers.first(name: "X-Request-Id") == "refused-1")
    }

    /// After real sign-ins (one Apple refuses with `invalid_client`):
    /// `/v1` by route and status, Apple's endpoints by outcome, the key
    /// set's age, the audit chain's sealed head, the process's own figures.
    @Test func metricsShowV1AndAppleCalls() async throws {
        let setup = try await SignInTests.Setup.start()
        try atTestEnd { await setup.server.stop() }
        let signedIn = try await setup.signIn(try setup.appleSignIn(sub: "001.met.0001"))
        #expect(signedIn.status == 200, "\(signedIn.text)")
        #expect(try await setup.get("/v1/users/001.met.0001").status == 200)
        #expect(try await setup.get("/v1/users/001.met.0002").status == 404)
        setup.apple.setTokenEndpointBehaviour(.status(400, error: "invalid_client"))
        let refused = try await setup.signIn(try setup.appleSignIn(sub: "001.met.0003"))
        #expect(refused.status >= 500, "\(refused.status) \(refused.text)")
        setup.apple.setTokenEndpointBehaviour(.normal)

        let metrics = try await PrometheusText.scrape(setup.server.metricsURL)
        func api(_ route: String, _ method: String, _ status: Int) -> Double? {
            metrics.value("siwa_api_request_duration_seconds_count", ["route": route, "method": method, "status": String(status)])
        }
        let routes = Set(metrics.samples.filter { $0.name == "siwa_api_request_duration_seconds_count" }.compactMap { $0.labels["route"] })
        #expect(api("/v1/sign-in", "POST", 200) == 1, "\(routes) \(metrics.text)")
        #expect(api("/v1/sign-in", "POST", refused.status) == 1)
        let userRoute = try #require(routes.first { $0.hasPrefix("/v1/users/") }, "\(routes)")
        #expect(!userRoute.contains("001.met"), "the route's pattern, never the sub: \(userRoute)")
        #expect(api(userRoute, "GET", 200) == 1 && api(userRoute, "GET", 404) == 1)
        #expect(metrics.value("siwa_api_request_duration_seconds_bucket", ["route": "/v1/sign-in", "status": "200", "le": "+Inf"]) == 1)

        func apple(_ endpoint: String, _ outcome: String) -> Double? {
            metrics.value("siwa_apple_request_duration_seconds_count", ["endpoint": endpoint, "outcome": outcome])
        }
        #expect(apple("token", "ok") == 1, "\(metrics.text)")
        #expect(apple("token", "invalid_client") == 1)
        #expect(apple("revoke", "invalid_client") == 0, "every series from the start")
        #expect((apple("keys", "ok") ?? 0) >= 1)
        #expect(metrics.value("siwa_apple_invalid_client_total", ["endpoint": "token"]) == 1)

        let age = try #require(metrics.value("siwa_apple_keys_age_seconds"), "\(metrics.text)")
        #expect(age >= 0 && age < 120)
        #expect(metrics.value("siwa_apple_keys_refresh_interval_seconds") == 3600)
        #expect(metrics.value("siwa_audit_chain_sealed_seq") != nil && metrics.value("siwa_audit_unsealed_oldest_seconds") != nil)
        #expect((metrics.value("process_open_fds") ?? 0) > 3 && (metrics.value("process_virtual_memory_bytes") ?? 0) > 1_000_000)
    }
}
