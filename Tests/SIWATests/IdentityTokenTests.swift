import AppleSignIn
import AppleSimulator
import Foundation
import Logging
import Testing

/// Identity tokens from the simulator: nonce, real_user_status, flexible booleans.
@Suite("Identity tokens", .testDatabases)
struct IdentityTokenTests {
    let apple: AppleSimulator
    let keys: AppleKeySet
    let verifier: IdentityTokenVerifier

    init() throws {
        apple = try AppleSimulator()
        keys = try AppleKeySet(jwks: apple.jwksJSON, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        verifier = IdentityTokenVerifier(keys: keys, policy: VerificationPolicy(audiences: ["com.example.app"]))
    }

    @Test func verifiesClaimsAndNonce() async throws {
        let token = try apple.identityToken(sub: "001.abc.002", audience: "com.example.app",
                                            email: "x@privaterelay.appleid.com", nonce: "n0nce-hash")
        let verified = try await verifier.verify(token, expectedNonce: "n0nce-hash")
        #expect(verified.claims.sub == "001.abc.002")
        #expect(verified.claims.emailVerified == true)
        #expect(verified.claims.isPrivateEmail == true)
        #expect(verified.claims.nonceSupported == true)
        #expect(verified.claims.realUserStatus == .likelyReal)
        await #expect(throws: VerificationFailure.nonceMismatch) {
            try await verifier.verify(token, expectedNonce: "another")
        }
    }

    /// Apple's rule: a nonce asked for must be there, unless the token says
    /// the device cannot carry one (`nonce_supported: false`).
    @Test func aTokenWithoutNonceFailsWhenOneIsExpectedUnlessNonceIsUnsupported() async throws {
        let token = try apple.identityToken(sub: "s", audience: "com.example.app")
        _ = try await verifier.verify(token)
        await #expect(throws: VerificationFailure.nonceMissing) { try await verifier.verify(token, expectedNonce: "n") }
        for supported in [true, false] {
            var claims = TokenSigner.identityClaims(sub: "s", audience: "com.example.app")
            claims["nonce_supported"] = supported
            let signed = try apple.signer.sign(header: ["kid": apple.currentKey.kid, "alg": "RS256"], claims: claims, key: apple.currentKey)
            if supported {
                await #expect(throws: VerificationFailure.nonceMissing) { try await verifier.verify(signed, expectedNonce: "n") }
            } else {
                #expect(try await verifier.verify(signed, expectedNonce: "n").claims.sub == "s")
            }
        }
    }

    @Test func badClaimTypesAreRefused() async throws {
        var claims = TokenSigner.identityClaims(sub: "s", audience: "com.example.app")
        claims["real_user_status"] = "2"
        let token = try apple.signer.sign(header: ["kid": apple.currentKey.kid, "alg": "RS256"], claims: claims, key: apple.currentKey)
        await #expect(throws: VerificationFailure.self) { try await verifier.verify(token) }
        claims = TokenSigner.identityClaims(sub: "", audience: "com.example.app")
        let empty = try apple.signer.sign(header: ["kid": apple.currentKey.kid, "alg": "RS256"], claims: claims, key: apple.currentKey)
        await #expect(throws: VerificationFailure.missingSubject) { try await verifier.verify(empty) }
    }
}

extension IdentityTokenTests {
    /// Apple may add real_user_status values: one outside 0–2 is kept as
    /// sent and read as unknown, never refused.
    @Test func aRealUserStatusAppleMayAddIsUnknown() async throws {
        var claims = TokenSigner.identityClaims(sub: "s", audience: "com.example.app")
        claims["real_user_status"] = 7
        let token = try apple.signer.sign(header: ["kid": apple.currentKey.kid, "alg": "RS256"], claims: claims, key: apple.currentKey)
        let verified = try await verifier.verify(token)
        #expect(verified.claims.realUserStatusValue == 7 && verified.claims.realUserStatus == .unknown)
    }

    /// An empty email (Apple School Manager) is none; `is_private_email`
    /// left out reads from the address; org_id and transfer_sub are read.
    @Test func emailClaimsAsAppleSendsThem() async throws {
        func verified(_ change: (inout [String: any Sendable]) -> Void) async throws -> AppleIdentityToken {
            var claims = TokenSigner.identityClaims(sub: "s", audience: "com.example.app", email: "x@privaterelay.appleid.com")
            change(&claims)
            let token = try apple.signer.sign(header: ["kid": apple.currentKey.kid, "alg": "RS256"], claims: claims, key: apple.currentKey)
            return try await verifier.verify(token).claims
        }
        let empty = try await verified { $0["email"] = ""; $0["email_verified"] = "false" }
        #expect(empty.email == nil && empty.emailIsPrivate == nil)
        let relay = try await verified { $0["is_private_email"] = nil; $0["email"] = "X@PrivateRelay.AppleID.com" }
        #expect(relay.isPrivateEmail == nil && relay.emailIsPrivate == true)
        let plain = try await verified { $0["is_private_email"] = nil; $0["email"] = "ada@example.com"; $0["email_verified"] = false }
        #expect(plain.emailIsPrivate == false && plain.emailVerified == false)
        let business = try await verified { $0["org_id"] = "org.123"; $0["transfer_sub"] = "000.t.1" }
        #expect(business.orgID == "org.123" && business.transferSub == "000.t.1")
    }

    /// docs/apple-signin-library.md's example, as written there, with the
    /// simulator's URL for Apple's: the keys are fetched over HTTP by the
    /// first verification (no reload first), then held.
    @Test func theLibraryExampleVerifiesOverHTTP() async throws {
        let appleServer = try await TestPorts.serve { try await apple.start(port: $0) }
        let httpClient = HTTPJWKSSource.makeHTTPClient()
        let keys = AppleKeySet(source: HTTPJWKSSource(url: appleServer.baseURL + "/auth/keys", httpClient: httpClient),
                               logger: Logger(label: "apple-keys"))
        let verifier = IdentityTokenVerifier(keys: keys, policy: VerificationPolicy(audiences: ["com.example.app"]))
        let idToken = try apple.identityToken(sub: "001.library.002", audience: "com.example.app", nonce: "n0nce-hash")
        // The client and the server are shut down whatever happens.
        var outcome: Result<[VerifiedIdentityToken], any Error>
        do {
            outcome = .success([try await verifier.verify(idToken, expectedNonce: "n0nce-hash"),
                                try await verifier.verify(idToken, expectedNonce: "n0nce-hash")])
        } catch { outcome = .failure(error) }
        try await httpClient.shutdown()
        await appleServer.stop()
        let verified = try outcome.get()
        #expect(verified.map(\.claims.sub) == ["001.library.002", "001.library.002"])
        #expect(verified.first?.audience == "com.example.app")
        #expect(keys.fetchCount == 1)
    }
}
