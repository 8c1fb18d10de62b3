import AppleSignIn
import AppleSimulator
import Foundation
import Logging
import Testing

/// `iat` lies between 2019-01-01 and now + leeway, `exp` after `iat` and at
/// most 7 days after it; `event_time` between 2019 and `exp`. Whatever number
/// a signed token carries, siwa answers 400 with a reason and keeps running.
@Suite("Token time bounds", .testDatabases)
struct TokenBoundsTests {
    struct Case: Sendable {
        let name: String
        let reason: String
        let iat: Double?
        let exp: Double?
        /// `event_time` as written in the JSON (nil: a genuine one).
        var eventTime: String? = nil
    }

    static var cases: [Case] {
        let now = Date().timeIntervalSince1970.rounded(.down)
        return [
            Case(name: "iat 1e300", reason: "iat_in_future", iat: 1e300, exp: 1e300 + 86400),
            Case(name: "iat -1e300", reason: "iat_out_of_range", iat: -1e300, exp: now + 86400),
            Case(name: "iat -9.3e18", reason: "iat_out_of_range", iat: -9.3e18, exp: now + 86400),
            Case(name: "iat 9.3e18", reason: "iat_in_future", iat: 9.3e18, exp: 9.3e18 + 86400),
            Case(name: "iat 0", reason: "iat_out_of_range", iat: 0, exp: now + 86400),
            Case(name: "iat one second before 2019", reason: "iat_out_of_range", iat: 1_546_300_799, exp: now + 86400),
            Case(name: "iat in an hour", reason: "iat_in_future", iat: now + 3600, exp: now + 7200),
            Case(name: "exp 1e300", reason: "exp_out_of_range", iat: now, exp: 1e300),
            Case(name: "exp 9.3e18", reason: "exp_out_of_range", iat: now, exp: 9.3e18),
            Case(name: "exp -1e300", reason: "exp_out_of_range", iat: now, exp: -1e300),
            Case(name: "exp before iat", reason: "exp_out_of_range", iat: now, exp: now - 10),
            Case(name: "exp equal to iat", reason: "exp_out_of_range", iat: now, exp: now),
            Case(name: "exp 8 days after iat", reason: "exp_out_of_range", iat: now, exp: now + 8 * 86400),
            Case(name: "event_time 1e300", reason: "malformed_events", iat: now, exp: now + 86400, eventTime: "1e300"),
            Case(name: "event_time -1e300", reason: "malformed_events", iat: now, exp: now + 86400, eventTime: "-1e300"),
            Case(name: "event_time Int64.max", reason: "malformed_events", iat: now, exp: now + 86400, eventTime: "9223372036854775807"),
            Case(name: "event_time Int64.min", reason: "malformed_events", iat: now, exp: now + 86400, eventTime: "-9223372036854775808"),
            Case(name: "event_time 9.3e18", reason: "malformed_events", iat: now, exp: now + 86400, eventTime: "9.3e18"),
            Case(name: "event_time 0", reason: "malformed_events", iat: now, exp: now + 86400, eventTime: "0"),
            Case(name: "event_time a year ahead", reason: "malformed_events", iat: now, exp: now + 86400,
                 eventTime: String(Int64(now + 365 * 86400) * 1000)),
        ]
    }

    /// The claims of a genuine-looking notification with `iat`, `exp` and
    /// `event_time` replaced (numbers written as given, not rounded).
    static func claims(_ hostile: Case, audience: String) -> [String: any Sendable] {
        var claims = TokenSigner.notificationClaims(type: "account-deleted", sub: "bounds.\(UUID().uuidString)", audience: audience)
        claims["iat"] = hostile.iat
        claims["exp"] = hostile.exp
        if let eventTime = hostile.eventTime {
            claims["events"] = #"{"type":"account-deleted","sub":"bounds.sub","event_time":\#(eventTime)}"#
        }
        return claims
    }

    /// Absurd times, each signed with Apple's (the simulator's) real key, are
    /// refused with their own reason over HTTP; the server still answers and
    /// still records a genuine notification afterwards.
    @Test func absurdTimesAreRefusedAndTheServerKeepsRunning() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        let key = siwa.simulator.currentKey
        for hostile in Self.cases {
            let token = try siwa.simulator.signer.sign(header: ["kid": key.kid, "alg": "RS256"],
                                                       claims: Self.claims(hostile, audience: ServerHarness.clientID), key: key)
            let answer = try await siwa.post(token: token)
            #expect(answer.status == 400, "\(hostile.name): \(answer.status) \(answer.text.prefix(200))")
            #expect(answer.reason == hostile.reason, "\(hostile.name): \(answer.text.prefix(200))")
        }
        #expect(try await siwa.get("/healthz").status == 200)
        let genuine = try await siwa.post(token: siwa.notification("account-deleted", sub: "bounds.genuine"))
        #expect(genuine.status == 200, "\(genuine.text)")
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.notifications") == 1)
    }

    /// The edges: iat exactly 2019-01-01, a lifetime of exactly 7 days and
    /// an event_time up to exp are accepted (by the verifier; no server).
    @Test func theBoundsThemselvesAreAccepted() async throws {
        let apple = try AppleSimulator()
        let keys = try AppleKeySet(jwks: apple.jwksJSON, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let start = VerificationPolicy.earliestIssuedAt
        let policy = VerificationPolicy(audiences: ["app"], now: { Date(timeIntervalSince1970: start + 3600) })
        let verifier = NotificationVerifier(keys: keys, policy: policy)
        var claims = TokenSigner.notificationClaims(type: "email-enabled", sub: "s", audience: "app",
                                                    issuedAt: Date(timeIntervalSince1970: start))
        claims["exp"] = start + VerificationPolicy.maximumLifetime
        claims["events"] = #"{"type":"email-enabled","sub":"s","event_time":\#(Int64(start + VerificationPolicy.maximumLifetime) * 1000)}"#
        let token = try apple.signer.sign(header: ["kid": apple.currentKey.kid, "alg": "RS256"], claims: claims, key: apple.currentKey)
        let notification = try await verifier.verify(token)
        #expect(notification.issuedAt == Date(timeIntervalSince1970: start))
        #expect(notification.expiresAt.timeIntervalSince(notification.issuedAt) == VerificationPolicy.maximumLifetime)
    }

    /// Identity tokens pass through the same bounds.
    @Test func identityTokensHaveTheSameBounds() async throws {
        let apple = try AppleSimulator()
        let keys = try AppleKeySet(jwks: apple.jwksJSON, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let verifier = IdentityTokenVerifier(keys: keys, policy: VerificationPolicy(audiences: ["com.example.app"]))
        let now = Date().timeIntervalSince1970.rounded(.down)
        let cases: [(iat: Double, exp: Double, failure: VerificationFailure)] = [
            (-1e300, now + 600, .issuedAtOutOfRange),
            (1e300, 1e300 + 600, .issuedInFuture),
            (1_500_000_000, now + 600, .issuedAtOutOfRange),
            (now, 1e300, .expiryOutOfRange),
            (now, now - 1, .expiryOutOfRange),
            (now, now + 8 * 86400, .expiryOutOfRange),
            (now - 8 * 86400, now - 7 * 86400, .expired),
        ]
        for (iat, exp, failure) in cases {
            var claims = TokenSigner.identityClaims(sub: "001.s.002", audience: "com.example.app")
            claims["iat"] = iat
            claims["exp"] = exp
            let token = try apple.signer.sign(header: ["kid": apple.currentKey.kid, "alg": "RS256"], claims: claims, key: apple.currentKey)
            await #expect(throws: failure, "iat \(iat) exp \(exp)") { try await verifier.verify(token) }
        }
        // A ten-minute token (Apple's older identity tokens) is fine.
        var claims = TokenSigner.identityClaims(sub: "001.s.002", audience: "com.example.app")
        claims["exp"] = now + 600
        let token = try apple.signer.sign(header: ["kid": apple.currentKey.kid, "alg": "RS256"], claims: claims, key: apple.currentKey)
        _ = try await verifier.verify(token)
    }
}
