import AppleSignIn
import AppleSimulator
import Foundation
import Logging
import Testing

/// Apple rotates keys without notice: an unknown kid triggers one refetch
/// (single flight, at most one per cooldown); a failed refetch keeps the old keys.
@Suite("Apple key rotation", .testDatabases)
struct KeyRotationTests {
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Apple's real key sets: start with the 2019 set (AIDOPK1 only), then
    /// Apple publishes the 2020 set; a genuine 2020 notification signed with
    /// the new key 86D88Kf is accepted after exactly one refetch.
    @Test func genuineTokenWithNewKidIsAcceptedAfterOneRefetch() async throws {
        let apple = try AppleSimulator()
        apple.serve(document: try Fixtures.jwksSnapshot("snapshot_2019_AIDOPK1.json"))
        let server = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await server.stop() }
        let keys = AppleKeySet(source: HTTPJWKSSource(url: server.baseURL + "/auth/keys", httpClient: .shared),
                               refetchCooldown: .seconds(30), logger: logger)
        #expect(await keys.reload())
        #expect(keys.keyIDs == ["AIDOPK1"])

        let token = try #require(try Fixtures.realTokens().first { $0.kid == "86D88Kf" && $0.kind == "notification" })
        let policy = VerificationPolicy(audiences: [token.aud], now: { Date(timeIntervalSince1970: token.iat + 1) })
        let verifier = NotificationVerifier(keys: keys, policy: policy)

        apple.serve(document: try Fixtures.jwksSnapshot("snapshot_2020-02_86D88Kf_eXaunmL_AIDOPK1.json"))
        let notification = try await verifier.verify(token.token)
        #expect(notification.event.type == "consent-revoked")
        #expect(apple.jwksRequests == 2)  // the initial load + one refetch
        #expect(keys.keyIDs.contains("86D88Kf"))

        // Known now: no further fetch.
        _ = try await verifier.verify(token.token)
        #expect(apple.jwksRequests == 2)
    }

    @Test func aFloodOfUnknownKidsCausesAtMostOneRefetchPerCooldown() async throws {
        let apple = try AppleSimulator()
        let server = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await server.stop() }
        let keys = AppleKeySet(source: HTTPJWKSSource(url: server.baseURL + "/auth/keys", httpClient: .shared),
                               refetchCooldown: .seconds(30), logger: logger)
        #expect(await keys.reload())
        let verifier = NotificationVerifier(keys: keys, policy: VerificationPolicy(audiences: ["app"]))
        let start = ContinuousClock.now

        let tokens = try (0..<100).map { i -> String in
            try apple.signer.sign(header: ["kid": "bogus-\(i)-\(UUID().uuidString.prefix(6))", "alg": "RS256"],
                                  claims: TokenSigner.notificationClaims(type: "email-enabled", sub: "s\(i)", audience: "app"),
                                  key: apple.currentKey)
        }
        let reasons = await withTaskGroup(of: String.self) { group in
            for token in tokens {
                group.addTask {
                    do { _ = try await verifier.verify(token); return "accepted" } catch let failure as VerificationFailure {
                        return failure.reason
                    } catch { return "unavailable" }
                }
            }
            return await group.reduce(into: [String]()) { $0.append($1) }
        }
        // Those that waited for the refetch learn the kid is unknown (400);
        // those that came after it, inside the cooldown, cannot be checked
        // now (503, Apple retries).
        #expect(reasons.allSatisfy { $0 == "unknown_kid" || $0 == "unavailable" })
        #expect(reasons.contains("unknown_kid"))
        let elapsed = ContinuousClock.now - start
        let cooldowns = Int(elapsed / .seconds(30)) + 1
        #expect(apple.jwksRequests - 1 <= cooldowns, "\(apple.jwksRequests - 1) refetches in \(elapsed)")
        #expect(apple.jwksRequests - 1 >= 1)
    }

    @Test func aFailedRefetchKeepsTheOldKeysAndAnswersUnavailable() async throws {
        let apple = try AppleSimulator()
        let server = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await server.stop() }
        let keys = AppleKeySet(source: HTTPJWKSSource(url: server.baseURL + "/auth/keys", httpClient: .shared),
                               refetchCooldown: .milliseconds(100), logger: logger)
        #expect(await keys.reload())
        let verifier = NotificationVerifier(keys: keys, policy: VerificationPolicy(audiences: ["app"]))
        let known = try apple.notification(type: "email-enabled", sub: "s", audience: "app")

        apple.setJWKSFailing(true)
        let rotated = try apple.rotate()
        let fresh = try apple.notification(type: "email-enabled", sub: "s", audience: "app", key: rotated)
        // Apple's keys unreachable for a new kid: cannot decide now (503), not "bad".
        await #expect(throws: AppleKeysUnavailable.self) { try await verifier.verify(fresh) }
        // The keys we had still work.
        _ = try await verifier.verify(known)

        apple.setJWKSFailing(false)
        // The refetch cooldown (100 ms) waited out: a clock, not an event;
        // a slower machine only waits longer.
        try await Task.sleep(for: .milliseconds(150))
        _ = try await verifier.verify(fresh)
    }

    @Test func aKeySetNeverComesFromAnEmptyOrBrokenDocument() throws {
        #expect(throws: JWKSError.self) { try AppleKeySet.parse(jwks: Data(#"{"keys":[]}"#.utf8)) }
        #expect(throws: JWKSError.self) { try AppleKeySet.parse(jwks: Data("<html>".utf8)) }
        let all = try AppleKeySet.parse(jwks: try Fixtures.jwksSnapshot("snapshot_2025-02_FftONTxoEg_pggnQeNCOU_dMlERBaFdK_rBRfVmqsjn_T8tIJ1zSrO.json"))
        #expect(all.count == 5)
    }
}
