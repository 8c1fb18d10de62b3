import AppleSignIn
import AppleSimulator
import Foundation
import Synchronization
import Testing

/// The simulator behaves as Apple does (issue 21, §5): `real_user_status`
/// on a native app's first authorization only, `is_private_email` left out
/// of some tokens, and, when strict, `invalid_grant` for a refresh sooner
/// than Apple's once a day. Over HTTP, with siwa's own Apple client.
@Suite("Simulator behaviour")
struct SimulatorBehaviourTests {
    static let clientID = "com.example.app"

    static func claims(_ token: String?) throws -> [String: Any] { try Fixtures.unverifiedClaims(try #require(token)) }

    @Test func realUserStatusComesWithANativeAppsFirstAuthorizationOnly() async throws {
        try await AppleTokenHarness.with { h in
            let first = try h.apple.signIn(sub: "001.rus", clientID: Self.clientID, givenName: "Ada")
            #expect(first.firstAuthorization && first.user != nil)
            #expect(try Self.claims(first.identityToken)["real_user_status"] as? Int == 2)
            let exchanged = try #require(await h.client.exchange(code: first.authorizationCode, clientID: Self.clientID).response)
            #expect(try Self.claims(exchanged.idToken)["real_user_status"] as? Int == 2, "the code's id_token too")
            let refreshToken = try #require(exchanged.refreshToken)
            let refreshed = try #require(await h.client.refresh(refreshToken: refreshToken, clientID: Self.clientID).response)
            #expect(try Self.claims(refreshed.idToken)["real_user_status"] == nil, "not in a refresh's id_token")

            let second = try h.apple.signIn(sub: "001.rus", clientID: Self.clientID, givenName: "Ada")
            #expect(!second.firstAuthorization && second.user == nil)
            #expect(try Self.claims(second.identityToken)["real_user_status"] == nil)
            let code = h.apple.issueAuthorizationCode(sub: "001.rus", clientID: Self.clientID)
            let later = try #require(await h.client.exchange(code: code, clientID: Self.clientID).response)
            #expect(try Self.claims(later.idToken)["real_user_status"] == nil)

            // A web client (a redirect URI): never.
            let web = try h.apple.signIn(sub: "001.web", clientID: Self.clientID, redirectURI: "https://example.com/callback")
            let webClaims = try Self.claims(web.identityToken)
            #expect(web.firstAuthorization && webClaims["real_user_status"] == nil)

            // Revoked: the next sign-in is a first authorization again.
            #expect(await h.client.revoke(token: refreshToken, clientID: Self.clientID) == .success)
            let back = try h.apple.signIn(sub: "001.rus", clientID: Self.clientID, givenName: "Ada", familyName: "King")
            let backClaims = try Self.claims(back.identityToken)
            #expect(back.firstAuthorization && backClaims["real_user_status"] as? Int == 2)
            let name = back.user?["name"] as? [String: any Sendable]
            #expect(name?["firstName"] as? String == "Ada" && name?["lastName"] as? String == "King")
        }
    }

    @Test func isPrivateEmailIsSometimesLeftOutForARelayAddress() async throws {
        try await AppleTokenHarness.with { h in
            let relay = "r@privaterelay.appleid.com"
            var carried: [Bool] = []
            var signIns: [SimulatedSignIn] = []
            for index in 0..<4 {
                let signIn = try h.apple.signIn(sub: "001.pe.\(index)", clientID: Self.clientID, email: relay)
                let claims = try Self.claims(signIn.identityToken)
                carried.append(claims["is_private_email"] != nil)
                signIns.append(signIn)
                #expect(claims["email"] as? String == relay)
            }
            #expect(carried == [true, false, true, false], "every second token leaves it out (the default)")
            // siwa's verifier reads such a token as private all the same.
            let verified = try await h.identityVerifier(audience: Self.clientID).verify(signIns[1].identityToken).claims
            #expect(verified.isPrivateEmail == nil && verified.emailIsPrivate == true)

            // Another address always carries it (false); the policy can be fixed.
            let plain = try h.apple.signIn(sub: "001.pe.plain", clientID: Self.clientID, email: "ada@example.com")
            #expect(try Self.claims(plain.identityToken)["is_private_email"] as? Bool == false)
            h.apple.setPrivateEmailClaim(.always)
            #expect(try (0..<2).allSatisfy { i in
                try Self.claims(try h.apple.signIn(sub: "001.pa.\(i)", clientID: Self.clientID, email: relay).identityToken)["is_private_email"] as? Bool == true
            })
            h.apple.setPrivateEmailClaim(.never)
            #expect(try (0..<2).allSatisfy { i in
                try Self.claims(try h.apple.signIn(sub: "001.pn.\(i)", clientID: Self.clientID, email: relay).identityToken)["is_private_email"] == nil
            })
            // An exchange's id_token follows the same rule; a flag asked for is always sent.
            let asked = h.apple.issueAuthorizationCode(sub: "001.pe.asked", clientID: Self.clientID, email: relay, isPrivateEmail: true)
            let response = try #require(await h.client.exchange(code: asked, clientID: Self.clientID).response)
            #expect(try Self.claims(response.idToken)["is_private_email"] as? Bool == true)
        }
    }

    /// Strict: a second refresh within a day of the first is `invalid_grant`
    /// (the token lives on: a day later it refreshes). Not strict: Apple's
    /// leniency, every refresh answered.
    @Test func aStrictSimulatorRefusesARefreshSoonerThanOnceADay() async throws {
        try await AppleTokenHarness.with { h in
            // Ahead of the secrets' iat (whole seconds of the real clock).
            let clock = ManualClock(Date().addingTimeInterval(5))
            h.apple.setTokenClock { clock.now }
            // Secrets that outlive the day the clock moves on.
            let client = h.client(secrets: try ClientSecretProvider(key: h.key, lifetime: .seconds(3 * 86_400)))
            let code = h.apple.issueAuthorizationCode(sub: "001.strict", clientID: Self.clientID)
            let refreshToken = try #require(await client.exchange(code: code, clientID: Self.clientID).response?.refreshToken)

            #expect(await client.refresh(refreshToken: refreshToken, clientID: Self.clientID).response != nil)
            #expect(await client.refresh(refreshToken: refreshToken, clientID: Self.clientID).response != nil, "lenient by default")

            h.apple.setStrictRefresh(true)
            clock.advance(by: 86_400)
            #expect(await client.refresh(refreshToken: refreshToken, clientID: Self.clientID).response != nil, "a day on")
            clock.advance(by: 3_600)
            #expect(await client.refresh(refreshToken: refreshToken, clientID: Self.clientID) == .invalidGrant, "an hour later")
            #expect(h.apple.isRefreshTokenLive(refreshToken), "throttled, not revoked")
            clock.advance(by: 86_400)
            #expect(await client.refresh(refreshToken: refreshToken, clientID: Self.clientID).response != nil)
        }
    }
}

/// A clock a test moves by hand.
final class ManualClock: Sendable {
    private let instant: Mutex<Date>
    init(_ start: Date) { instant = Mutex(start) }
    var now: Date { instant.withLock { $0 } }
    func advance(by seconds: TimeInterval) { instant.withLock { $0 += seconds } }
}
