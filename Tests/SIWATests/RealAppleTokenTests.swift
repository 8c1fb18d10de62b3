import AppleSignIn
import Foundation
import Logging
import Testing

/// The 31 genuine Apple-signed tokens: each verifies at iat + 1 with its own
/// audience and Apple's key for its kid, and fails with one flipped
/// signature byte and with the clock past exp.
@Suite("Genuine Apple tokens")
struct RealAppleTokenTests {
    static let tokens: [Fixtures.RealToken] = (try? Fixtures.realTokens()) ?? []
    let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    @Test func allThirtyOneArePresent() {
        #expect(Self.tokens.count == 31)
        #expect(Self.tokens.filter { $0.kind == "notification" }.count == 5)
    }

    func policy(_ token: Fixtures.RealToken, at time: Double) -> VerificationPolicy {
        VerificationPolicy(audiences: [token.aud], now: { Date(timeIntervalSince1970: time) })
    }

    @Test(arguments: tokens)
    func verifiesAtIssueTime(_ token: Fixtures.RealToken) async throws {
        let keys = try AppleKeySet(jwks: token.jwks, logger: logger)
        let policy = policy(token, at: token.iat + 1)
        if token.kind == "notification" {
            let notification = try await NotificationVerifier(keys: keys, policy: policy).verify(token.token)
            #expect(notification.audience == token.aud)
            #expect(notification.event.type == token.eventType)
            #expect(notification.event.sub == token.eventSub)
            #expect(notification.event.eventTime > 1_500_000_000_000)  // milliseconds
            #expect(!notification.jti.isEmpty)
        } else {
            let identity = try await IdentityTokenVerifier(keys: keys, policy: policy).verify(token.token)
            #expect(identity.audience == token.aud)
            #expect(!identity.claims.sub.isEmpty)
            // The verifier reads Apple's claims without JSONDecoder where it
            // can (PlainJSONObject): the same claims as JSONDecoder reads.
            #expect(identity.claims == (try JSONDecoder().decode(AppleIdentityToken.self, from: identity.claimsJSON)))
        }
    }

    @Test(arguments: tokens)
    func failsWithOneFlippedSignatureByte(_ token: Fixtures.RealToken) async throws {
        let keys = try AppleKeySet(jwks: token.jwks, logger: logger)
        let forged = Self.flipSignatureByte(token.token)
        let error = await #expect(throws: VerificationFailure.self) {
            try await verify(forged, token, keys: keys, at: token.iat + 1)
        }
        #expect(error == .badSignature)
    }

    @Test(arguments: tokens)
    func failsPastExpiry(_ token: Fixtures.RealToken) async throws {
        let keys = try AppleKeySet(jwks: token.jwks, logger: logger)
        let error = await #expect(throws: VerificationFailure.self) {
            try await verify(token.token, token, keys: keys, at: token.exp + 61)
        }
        #expect(error == .expired)
        // ... but inside the 60 s leeway it still passes.
        try await verify(token.token, token, keys: keys, at: token.exp + 59)
    }

    @Test func failsForAnotherAudience() async throws {
        let token = try #require(Self.tokens.first { $0.kind == "notification" })
        let keys = try AppleKeySet(jwks: token.jwks, logger: logger)
        let policy = VerificationPolicy(audiences: ["com.example.other"], now: { Date(timeIntervalSince1970: token.iat + 1) })
        await #expect(throws: VerificationFailure.wrongAudience) {
            try await NotificationVerifier(keys: keys, policy: policy).verify(token.token)
        }
    }

    @Test func stringAndBooleanEmailFlagsBothDecode() async throws {
        var seen: Set<String> = []
        for token in Self.tokens where token.kind == "id_token" {
            let keys = try AppleKeySet(jwks: token.jwks, logger: logger)
            let identity = try await IdentityTokenVerifier(keys: keys, policy: policy(token, at: token.iat + 1)).verify(token.token)
            let raw = try Fixtures.unverifiedClaims(token.token)["email_verified"]
            if raw is String { seen.insert("string") } else if raw != nil { seen.insert("bool") }
            if raw != nil { #expect(identity.claims.emailVerified != nil) }
        }
        #expect(seen == ["string", "bool"])
    }

    @discardableResult
    func verify(_ jws: String, _ token: Fixtures.RealToken, keys: AppleKeySet, at time: Double) async throws -> String {
        let policy = policy(token, at: time)
        if token.kind == "notification" {
            return try await NotificationVerifier(keys: keys, policy: policy).verify(jws).jti
        }
        return try await IdentityTokenVerifier(keys: keys, policy: policy).verify(jws).claims.sub
    }

    /// Flip one bit in the middle of the decoded signature and re-encode.
    static func flipSignatureByte(_ token: String) -> String {
        var parts = token.split(separator: ".").map(String.init)
        var signature = Base64URL.decode(parts[2])!
        signature[signature.count / 2] ^= 0x01
        parts[2] = Base64URL.encode(signature)
        return parts.joined(separator: ".")
    }
}

extension Fixtures.RealToken: CustomTestStringConvertible {
    var testDescription: String { file }
}
