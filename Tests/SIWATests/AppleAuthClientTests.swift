import AppleSignIn
import AppleSimulator
import Crypto
import Foundation
import Hummingbird
import Synchronization
import Testing

/// siwa's client of Apple's `/auth/token` and `/auth/revoke` against the
/// simulator on loopback: code exchange, refresh, revocation and its
/// consent-revoked notification, client authentication.
@Suite("Apple token endpoints", .testDatabases)
struct AppleAuthClientTests {
    static let clientID = "com.example.app"

    @Test func anExchangeGivesTokensAndAnIdentityTokenThatVerifies() async throws {
        try await AppleTokenHarness.with { h in
            let code = h.apple.issueAuthorizationCode(sub: "001.abc.002", clientID: Self.clientID, email: "x@example.com",
                                                      isPrivateEmail: true, nonce: "n0nce")
            let outcome = await h.client.exchange(code: code, clientID: Self.clientID)
            let response = try #require(outcome.response, "\(outcome)")
            #expect(response.tokenType == "Bearer")
            #expect(response.expiresIn == 3600)
            #expect(!response.accessToken.isEmpty)
            let refreshToken = try #require(response.refreshToken)
            #expect(h.apple.isRefreshTokenLive(refreshToken))
            #expect(h.apple.lastTokenForm.map { Set($0.keys) } == ["client_id", "client_secret", "code", "grant_type"])
            #expect(h.apple.lastTokenForm?["grant_type"] == "authorization_code")

            let verified = try await h.identityVerifier(audience: Self.clientID).verify(try #require(response.idToken),
                                                                                         expectedNonce: "n0nce")
            #expect(verified.claims.sub == "001.abc.002")
            #expect(verified.audience == Self.clientID)
            #expect(verified.claims.email == "x@example.com")
            #expect(verified.claims.isPrivateEmail == true)
        }
    }

    /// Used, expired, unknown, another client's, or presented with another
    /// redirect_uri: invalid_grant. A refusal does not use the code up.
    @Test func aCodeIsSingleUseBoundToItsClientAndExpires() async throws {
        try await AppleTokenHarness.with { h in
            let code = h.apple.issueAuthorizationCode(sub: "s1", clientID: Self.clientID)
            #expect(await h.client.exchange(code: code, clientID: Self.clientID).response != nil)
            #expect(await h.client.exchange(code: code, clientID: Self.clientID) == .invalidGrant)

            let expired = h.apple.issueAuthorizationCode(sub: "s2", clientID: Self.clientID)
            h.apple.expireCode(expired)
            #expect(await h.client.exchange(code: expired, clientID: Self.clientID) == .invalidGrant)
            #expect(await h.client.exchange(code: "c0000.0.sim.unknown", clientID: Self.clientID) == .invalidGrant)

            let othersCode = h.apple.issueAuthorizationCode(sub: "s3", clientID: "com.example.other")
            #expect(await h.client.exchange(code: othersCode, clientID: Self.clientID) == .invalidGrant)
            #expect(await h.client.exchange(code: othersCode, clientID: "com.example.other").response != nil)

            let web = h.apple.issueAuthorizationCode(sub: "s4", clientID: Self.clientID, redirectURI: "https://example.com/callback")
            #expect(await h.client.exchange(code: web, clientID: Self.clientID) == .invalidGrant)
            #expect(await h.client.exchange(code: web, clientID: Self.clientID, redirectURI: "https://evil.example/callback") == .invalidGrant)
            #expect(await h.client.exchange(code: web, clientID: Self.clientID, redirectURI: "https://example.com/callback").response != nil)
            #expect(h.apple.lastTokenForm?["redirect_uri"] == "https://example.com/callback")
        }
    }

    /// Secrets signed with an unregistered key, naming another team, or
    /// expired: invalid_client on all three endpoints' uses.
    @Test func aBadClientSecretIsInvalidClient() async throws {
        try await AppleTokenHarness.with { h in
            let unregistered = AppleClientSecretKey(teamID: AppleTokenHarness.teamID, keyID: AppleTokenHarness.keyID,
                                                    privateKey: P256.Signing.PrivateKey())
            let otherTeam = AppleClientSecretKey(teamID: "OTHERTEAM1", keyID: AppleTokenHarness.keyID, privateKey: h.privateKey)
            let twoHoursAgo = Date().addingTimeInterval(-7200)
            let badClients = [
                h.client(secrets: try ClientSecretProvider(key: unregistered)),
                h.client(secrets: try ClientSecretProvider(key: otherTeam)),
                h.client(secrets: try ClientSecretProvider(key: h.key, now: { twoHoursAgo })),
            ]
            let code = h.apple.issueAuthorizationCode(sub: "s", clientID: Self.clientID)
            for client in badClients {
                #expect(await client.exchange(code: code, clientID: Self.clientID) == .invalidClient)
                #expect(await client.refresh(refreshToken: "r", clientID: Self.clientID) == .invalidClient)
                #expect(await client.revoke(token: "r", clientID: Self.clientID) == .invalidClient)
            }
            #expect(h.apple.revokedTokens.isEmpty)
            let response = try #require(await h.client.exchange(code: code, clientID: Self.clientID).response)
            #expect(await h.client.revoke(token: try #require(response.refreshToken), clientID: Self.clientID) == .success)
        }
    }

    /// The simulator checks every part of a secret as Apple does, each on
    /// its own: a secret right but for one thing (the header's kid, an extra
    /// header field, aud, sub against the form's client_id, a DER signature)
    /// is invalid_client; the same secret made right is accepted.
    @Test func eachPartOfTheClientSecretIsChecked() async throws {
        struct Header: Encodable { var alg = "ES256"; var kid: String; var typ: String? }
        struct Claims: Encodable { let iss: String; let iat: Int64; let exp: Int64; let aud: String; let sub: String }
        try await AppleTokenHarness.with { h in
            let now = Int64(Date().timeIntervalSince1970)
            func secret(kid: String = AppleTokenHarness.keyID, typ: String? = nil, aud: String = "https://appleid.apple.com",
                        sub: String = Self.clientID) throws -> String {
                try ES256JWS.sign(header: Header(kid: kid, typ: typ),
                                  claims: Claims(iss: AppleTokenHarness.teamID, iat: now - 10, exp: now + 600, aud: aud, sub: sub),
                                  with: h.privateKey)
            }
            func exchange(_ secret: String) async throws -> HTTPAnswer {
                let code = h.apple.issueAuthorizationCode(sub: "s", clientID: Self.clientID)
                let form = "client_id=\(Self.clientID)&client_secret=\(secret)&code=\(code)&grant_type=authorization_code"
                return try await HTTPAnswer.send(method: .POST, url: h.server.baseURL + "/auth/token", body: Data(form.utf8),
                                                 headers: [("Content-Type", "application/x-www-form-urlencoded")])
            }
            let good = try secret()
            let parts = good.split(separator: ".").map(String.init)
            let signature = try #require(Base64URL.decode(parts[2]))
            let der = try P256.Signing.ECDSASignature(rawRepresentation: signature).derRepresentation
            let bad = [
                "unknown kid": try secret(kid: "OTHERKEY12"),
                "extra header field": try secret(typ: "JWT"),
                "aud": try secret(aud: "https://appleid.apple.com/"),
                "sub": try secret(sub: "com.example.other"),
                "DER signature": parts[0] + "." + parts[1] + "." + Base64URL.encode(der),
            ]
            for (what, secret) in bad {
                let answer = try await exchange(secret)
                #expect(answer.status == 400 && answer.reason == "invalid_client", "\(what): \(answer.status) \(answer.text)")
            }
            let accepted = try await exchange(good)
            #expect(accepted.status == 200 && accepted.json["refresh_token"] is String, "\(accepted.text)")
        }
    }

    @Test func aRefreshTokenWorksUntilRevoked() async throws {
        try await AppleTokenHarness.with { h in
            let code = h.apple.issueAuthorizationCode(sub: "001.r", clientID: Self.clientID)
            let refreshToken = try #require(await h.client.exchange(code: code, clientID: Self.clientID).response?.refreshToken)

            let refreshed = try #require(await h.client.refresh(refreshToken: refreshToken, clientID: Self.clientID).response)
            #expect(refreshed.refreshToken == nil, "Apple sends no new refresh token")
            let verified = try await h.identityVerifier(audience: Self.clientID).verify(try #require(refreshed.idToken))
            #expect(verified.claims.sub == "001.r")
            #expect(h.apple.refreshRequests(for: refreshToken) == 1)
            let secret = try #require(h.apple.lastTokenForm?["client_secret"])
            #expect(h.apple.lastTokenForm.map { Set($0.keys) } == ["client_id", "client_secret", "grant_type", "refresh_token"])

            #expect(await h.client.revoke(token: refreshToken, clientID: Self.clientID) == .success)
            #expect(h.apple.lastRevokeForm == ["client_id": Self.clientID, "client_secret": secret, "token": refreshToken,
                                               "token_type_hint": "refresh_token"], "one secret for all requests, not one each")
            #expect(h.apple.revokedTokens == [refreshToken])
            #expect(await h.client.refresh(refreshToken: refreshToken, clientID: Self.clientID) == .invalidGrant)
            #expect(h.apple.refreshRequests(for: refreshToken) == 2)
            // Apple answers 200 for a dead or unknown token too.
            #expect(await h.client.revoke(token: refreshToken, clientID: Self.clientID) == .success)
            #expect(await h.client.revoke(token: "never-issued", clientID: Self.clientID, tokenTypeHint: .accessToken) == .success)
            #expect(h.apple.revokedTokens == [refreshToken, refreshToken, "never-issued"])

            // The user revoking at appleid.apple.com kills a token too.
            let second = h.apple.issueAuthorizationCode(sub: "001.r", clientID: Self.clientID)
            let other = try #require(await h.client.exchange(code: second, clientID: Self.clientID).response?.refreshToken)
            h.apple.revokeRefreshToken(other)
            #expect(await h.client.refresh(refreshToken: other, clientID: Self.clientID) == .invalidGrant)
        }
    }

    /// After a revocation through the API the simulator, as Apple, POSTs a
    /// signed consent-revoked notification; a revocation by the user at
    /// appleid.apple.com (`revokeRefreshToken`) sends none here.
    @Test func aRevocationSendsAConsentRevokedNotification() async throws {
        let received = Mutex<[Data]>([])
        let router = Router(context: BasicRequestContext.self)
        router.post("/apple/notifications") { request, _ -> Response in
            let body = Data(buffer: try await request.body.collect(upTo: 64 * 1024))
            received.withLock { $0.append(body) }
            return Response(status: .ok)
        }
        let endpoint = try await TestPorts.serve { try await RunningServer.start(router: router, port: $0, logger: AppleTokenHarness.logger) }
        try atTestEnd { await endpoint.stop() }

        try await AppleTokenHarness.with { h in
            h.apple.setNotificationEndpoint(URL(string: endpoint.baseURL + "/apple/notifications"))
            let quiet = try #require(await h.client.exchange(code: h.apple.issueAuthorizationCode(sub: "001.quiet", clientID: Self.clientID),
                                                             clientID: Self.clientID).response?.refreshToken)
            h.apple.revokeRefreshToken(quiet)

            let code = h.apple.issueAuthorizationCode(sub: "001.gone", clientID: Self.clientID)
            let refreshToken = try #require(await h.client.exchange(code: code, clientID: Self.clientID).response?.refreshToken)
            #expect(await h.client.revoke(token: refreshToken, clientID: Self.clientID) == .success)

            #expect(try await eventually(upTo: .seconds(30)) { received.withLock { !$0.isEmpty } })
            // A later revocation's notification marks the end: nothing more
            // came for the first, nor any for the user's own revocation before it.
            let marker = h.apple.issueAuthorizationCode(sub: "001.marker", clientID: Self.clientID)
            let markerToken = try #require(await h.client.exchange(code: marker, clientID: Self.clientID).response?.refreshToken)
            #expect(await h.client.revoke(token: markerToken, clientID: Self.clientID) == .success)
            #expect(try await eventually(upTo: .seconds(30)) { received.withLock { $0.count >= 2 } })
            let bodies = received.withLock { $0 }
            try #require(bodies.count == 2, "\(bodies.count) notifications")
            let keys = try AppleKeySet(jwks: h.apple.jwksJSON, logger: AppleTokenHarness.logger)
            let verifier = NotificationVerifier(keys: keys, policy: VerificationPolicy(audiences: [Self.clientID]))
            var events: [String] = []
            for body in bodies {
                let payload = try #require((try JSONSerialization.jsonObject(with: body) as? [String: Any])?["payload"] as? String)
                let notification = try await verifier.verify(payload)
                events.append("\(notification.event.type) \(notification.event.sub)")
            }
            #expect(events == ["consent-revoked 001.gone", "consent-revoked 001.marker"])
        }
    }
}
