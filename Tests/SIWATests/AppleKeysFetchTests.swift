import AppleSignIn
import AppleSimulator
import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import Testing

/// Fetching Apple's keys: unusable keys are skipped, one deadline covers the
/// whole fetch, no redirect is followed, and an unknown kid that cannot be
/// checked now (cooldown) is 503, not a final 400.
@Suite("Apple key fetch", .testDatabases)
struct AppleKeysFetchTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A client from `HTTPJWKSSource.makeHTTPClient()`, shut down whatever happens.
    static func withKeysClient<T: Sendable>(_ body: (HTTPClient) async throws -> T) async throws -> T {
        let client = HTTPJWKSSource.makeHTTPClient()
        do {
            let result = try await body(client)
            try await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    static func document(_ entries: [Any]) throws -> Data {
        try JSONSerialization.data(withJSONObject: ["keys": entries])
    }

    /// Entries siwa cannot use: a 1024-bit RSA key (which
    /// `_RSA.Signing.PublicKey(n:e:)` refuses), bad base64url, an EC key, a
    /// symmetric key, an RS512 key, no kid, not an object at all.
    static func unusableEntries(realModulus: String) -> [Any] {
        let weakModulus = Data([0xC1] + (0..<127).map { _ in UInt8.random(in: 0...255) })
        return [
            ["kty": "RSA", "kid": "weak1024", "use": "sig", "alg": "RS256", "n": Base64URLEncoding.encode(weakModulus), "e": "AQAB"],
            ["kty": "RSA", "kid": "badbase64", "use": "sig", "alg": "RS256", "n": "not*base64url", "e": "AQAB"],
            ["kty": "EC", "kid": "ec1", "use": "sig", "alg": "ES256", "crv": "P-256",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"],
            ["kty": "oct", "kid": "hmac", "k": "c2VjcmV0"],
            ["kty": "RSA", "kid": "rs512", "use": "sig", "alg": "RS512", "n": realModulus, "e": "AQAB"],
            ["kty": "RSA", "use": "sig", "alg": "RS256", "n": realModulus, "e": "AQAB"],
            ["kty": "RSA", "kid": 7, "n": 1, "e": ["AQAB"]] as [String: Any],
            42,
            NSNull(),
        ]
    }

    @Test func unusableKeysAreSkippedAndTheOthersStillVerify() async throws {
        let apple = try AppleSimulator(keyCount: 2)
        let real = apple.keys.map(\.jwk)
        let unusable = Self.unusableEntries(realModulus: real[0]["n"] ?? "")
        let document = try Self.document(Array(unusable.prefix(4)) + real + Array(unusable.dropFirst(4)))
        apple.serve(document: document)
        let server = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await server.stop() }

        let parsed = try AppleKeySet.parseReporting(jwks: document)
        #expect(Set(parsed.keys.keys) == Set(apple.keys.map(\.kid)))
        #expect(parsed.skipped.count == unusable.count, "\(parsed.skipped)")
        #expect(parsed.skipped.contains { $0.contains("weak1024") && $0.contains("2048") }, "\(parsed.skipped)")

        try await Self.withKeysClient { client in
            let keys = AppleKeySet(source: HTTPJWKSSource(url: server.baseURL + "/auth/keys", httpClient: client), logger: logger)
            #expect(await keys.reload())
            #expect(Set(keys.keyIDs) == Set(apple.keys.map(\.kid)))
            let verifier = NotificationVerifier(keys: keys, policy: VerificationPolicy(audiences: ["app"]))
            for key in apple.keys {
                let token = try apple.notification(type: "email-enabled", sub: "s", audience: "app", key: key)
                #expect(try await verifier.verify(token).event.sub == "s")
            }

            // A set with no usable key at all is refused, and the keys held stay.
            apple.serve(document: try Self.document(unusable))
            #expect(await keys.reload() == false)
            #expect(Set(keys.keyIDs) == Set(apple.keys.map(\.kid)))
        }
        #expect(throws: JWKSError.self) { try AppleKeySet.parse(jwks: try Self.document(unusable)) }
        #expect(throws: JWKSError.self) { try AppleKeySet.parse(jwks: Data(#"{"keys":{}}"#.utf8)) }
    }

    /// A key server that sends the head and then stalls the body, or
    /// trickles it a byte at a time: the fetch fails at its deadline.
    @Test func aStalledOrTricklingBodyFailsTheFetchAtTheDeadline() async throws {
        let router = Router(context: BasicRequestContext.self)
        router.get("/stall") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(contentLength: 4096) { writer in
                try await writer.write(ByteBuffer(string: #"{"keys":["#))
                try await Task.sleep(for: .seconds(30))
            })
        }
        router.get("/trickle") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(contentLength: 4096) { writer in
                for _ in 0..<4096 {
                    try await writer.write(ByteBuffer(string: " "))
                    try await Task.sleep(for: .milliseconds(100))
                }
            })
        }
        let server = try await TestPorts.serve { try await RunningServer.start(router: router, port: $0, logger: logger) }
        try atTestEnd { await server.stop() }
        try await Self.withKeysClient { client in
            for path in ["/stall", "/trickle"] {
                let source = HTTPJWKSSource(url: server.baseURL + path, httpClient: client, timeout: .seconds(1))
                let start = ContinuousClock.now
                await #expect(throws: (any Error).self, "\(path)") { _ = try await source.fetchJWKS() }
                let elapsed = ContinuousClock.now - start
                #expect(elapsed < .seconds(4), "\(path): the fetch took \(elapsed)")
            }
        }
    }

    /// A key URL that redirects (anywhere, even to genuine keys) is a failed
    /// fetch: keys come from the configured URL only.
    @Test func redirectsAreNotFollowed() async throws {
        let apple = try AppleSimulator()
        let appleServer = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await appleServer.stop() }
        let target = appleServer.baseURL + "/auth/keys"
        let router = Router(context: BasicRequestContext.self)
        let redirected = Locked(0)
        for code in [301, 302, 303, 307, 308] {
            router.get("/redirect/\(code)") { _, _ -> Response in
                redirected.withLock { $0 += 1 }
                return Response(status: .init(code: code), headers: [.location: target])
            }
        }
        let redirector = try await TestPorts.serve { try await RunningServer.start(router: router, port: $0, logger: logger) }
        try atTestEnd { await redirector.stop() }
        try await Self.withKeysClient { client in
            for code in [301, 302, 303, 307, 308] {
                let keys = AppleKeySet(source: HTTPJWKSSource(url: redirector.baseURL + "/redirect/\(code)", httpClient: client),
                                       logger: logger)
                #expect(await keys.reload() == false, "\(code)")
                #expect(!keys.isLoaded)
            }
        }
        #expect(apple.jwksRequests == 0)

        // siwa serve builds its key source the same way: it never becomes
        // ready, and never asks the redirect's target.
        let before = redirected.withLock { $0 }
        let siwa = try await ServerHarness.start(settings: ["SIWA_APPLE_JWKS_URL": redirector.baseURL + "/redirect/302"],
                                                 waitUntilReady: false)
        try atTestEnd { await siwa.stop() }
        // Its key fetch has been answered with the redirect (a follower
        // would ask the target right after).
        #expect(try await eventually(upTo: .seconds(30)) { redirected.withLock { $0 } > before })
        let ready = try await siwa.get("/readyz")
        #expect(ready.status == 503, "\(ready.text)")
        #expect(apple.jwksRequests == 0)
    }

    /// A bogus kid makes siwa refetch; a genuine notification signed with a
    /// key Apple has just rotated in, arriving inside the cooldown, is 503
    /// (Apple retries) instead of a final 400; once the cooldown is over the
    /// retry refetches and is recorded. An unknown kid after a fresh fetch
    /// is still a 400.
    @Test func anUnknownKidInsideTheCooldownIsUnavailableThenAccepted() async throws {
        // Long enough that a loaded machine still posts the second token
        // inside it (5 s was not, once, with the whole suite running).
        let cooldown = 15.0
        let siwa = try await ServerHarness.start(settings: ["SIWA_APPLE_JWKS_REFETCH_COOLDOWN_SECONDS": "\(cooldown)"])
        try atTestEnd { await siwa.stop() }
        let sim = siwa.simulator
        let bogus = try sim.unpublishedKey()
        let forged = try sim.notification(type: "email-enabled", sub: "cool.bogus", audience: ServerHarness.clientID, key: bogus)
        let firstFetch = ContinuousClock.now
        let refused = try await siwa.post(token: forged)
        // The refetch (and its cooldown) started before this answer came.
        let refusedAt = ContinuousClock.now
        #expect(refused.status == 400)
        #expect(refused.reason == "unknown_kid")

        let rotated = try sim.rotate()
        let genuine = try sim.notification(type: "account-deleted", sub: "cool.genuine", audience: ServerHarness.clientID, key: rotated)
        let during = try await siwa.post(token: genuine)
        #expect(ContinuousClock.now - firstFetch < .seconds(cooldown), "too slow to test inside the cooldown")
        #expect(during.status == 503, "\(during.status) \(during.text)")
        #expect(during.reason == "unavailable")
        #expect(during.headers.first(name: "Retry-After") == "5")
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.notifications") == 0)

        // The cooldown is a clock: waited out, not polled for (a retry
        // inside it is the 503 above).
        let wait = refusedAt + .milliseconds(Int64(cooldown * 1000) + 100) - ContinuousClock.now
        if wait > .zero { try await Task.sleep(for: wait) }
        let retried = try await siwa.post(token: genuine)
        #expect(retried.status == 200, "\(retried.status) \(retried.text)")
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.notifications") == 1)
    }
}
