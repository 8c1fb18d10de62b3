import AppleSignIn
import AppleSimulator
import AsyncHTTPClient
import Foundation
import NIOCore
import Testing

/// When Apple's token endpoints misbehave: a stall ends at the deadline, 5xx
/// and 429 are "unavailable" with their Retry-After, other refusals are
/// typed; the form encoding survives odd characters; nothing printed holds
/// a token or a secret.
@Suite("Apple token endpoints: failures and encoding", .testDatabases)
struct AppleAuthFailureTests {
    static let clientID = "com.example.app"

    /// Nothing sent back: the client gives up at its deadline (not the
    /// HTTP client's 10 s read timeout), and nothing was used up.
    @Test func aStalledEndpointIsUnavailableAtTheDeadline() async throws {
        try await AppleTokenHarness.with(timeout: .seconds(1)) { h in
            let code = h.apple.issueAuthorizationCode(sub: "s", clientID: Self.clientID)
            h.apple.setTokenEndpointBehaviour(.stall)
            h.apple.setRevokeEndpointBehaviour(.stall)
            for attempt in ["exchange", "revoke"] {
                let start = ContinuousClock.now
                let outcome: String
                if attempt == "exchange" {
                    outcome = await h.client.exchange(code: code, clientID: Self.clientID).description
                } else {
                    outcome = await h.client.revoke(token: "r", clientID: Self.clientID).description
                }
                let elapsed = ContinuousClock.now - start
                #expect(outcome.hasPrefix("unavailable (no complete answer within 1"), "\(attempt): \(outcome)")
                #expect(elapsed >= .milliseconds(900) && elapsed < .seconds(3), "\(attempt) took \(elapsed) (the stall lasts 2 min)")
            }
            #expect(h.apple.tokenRequests == 1 && h.apple.revokeRequests == 1)
            h.apple.setTokenEndpointBehaviour(.normal)
            h.apple.setRevokeEndpointBehaviour(.normal)
            #expect(await h.client.exchange(code: code, clientID: Self.clientID).response != nil)
        }
    }

    @Test func statusAnswersAreSorted() async throws {
        try await AppleTokenHarness.with { h in
            let inTwoMinutes = Date().addingTimeInterval(120)
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let cases: [(SimulatedEndpointBehaviour, AppleTokenOutcome)] = [
                (.status(503, retryAfter: "7"), .unavailable(retryAfter: .seconds(7), reason: "status 503")),
                (.status(500, error: "server_error"), .unavailable(retryAfter: nil, reason: "status 500")),
                (.status(429, error: "too_many", retryAfter: "120"), .unavailable(retryAfter: .seconds(120), reason: "status 429")),
                (.status(400, error: "invalid_request"), .rejected(status: 400, error: "invalid_request")),
                (.status(400, error: "unsupported_grant_type"), .rejected(status: 400, error: "unsupported_grant_type")),
                (.status(400, error: "Invalid Token r.secret.value"), .rejected(status: 400, error: nil)),
                (.status(403), .rejected(status: 403, error: nil)),
                (.status(400, error: "invalid_grant"), .invalidGrant),
                (.status(400, error: "invalid_client"), .invalidClient),
                (.status(401), .invalidClient),
                (.status(302), .unavailable(retryAfter: nil, reason: "unexpected status 302")),
            ]
            for (behaviour, expected) in cases {
                h.apple.setTokenEndpointBehaviour(behaviour)
                #expect(await h.client.refresh(refreshToken: "r", clientID: Self.clientID) == expected, "\(behaviour)")
            }

            h.apple.setRevokeEndpointBehaviour(.status(429, retryAfter: formatter.string(from: inTwoMinutes)))
            guard case .unavailable(let retryAfter?, "status 429") = await h.client.revoke(token: "r", clientID: Self.clientID) else {
                Issue.record("429 with an HTTP-date is not unavailable with a Retry-After")
                return
            }
            #expect(retryAfter > .seconds(100) && retryAfter <= .seconds(121), "\(retryAfter)")
            h.apple.setRevokeEndpointBehaviour(.status(400, error: "invalid_grant"))
            #expect(await h.client.revoke(token: "r", clientID: Self.clientID) == .invalidGrant)

            // A connection closed without an answer: unavailable (usually
            // at once, as a failed request; on a loaded machine the close
            // can reach the client late, and then the deadline ends it).
            h.apple.setTokenEndpointBehaviour(.closeConnection)
            let start = ContinuousClock.now
            let closed = await h.client.refresh(refreshToken: "r", clientID: Self.clientID)
            guard case .unavailable = closed else {
                Issue.record("a closed connection is not unavailable: \(closed)")
                return
            }
            #expect(ContinuousClock.now - start < h.client.timeout + .seconds(2), "the deadline holds")
        }
    }

    @Test func formEncodingRoundTripsOddCharacters() async throws {
        #expect(FormURLEncoding.encode([("a b", "x+y&z=w/é 漢"), ("k", "~*-._")])
            == "a+b=x%2By%26z%3Dw%2F%C3%A9+%E6%BC%A2&k=%7E*-._")
        try await AppleTokenHarness.with { h in
            let clientID = "com.example.app+&=% é漢字"
            let redirect = "https://example.com/cb?a=1&b=2 3+4%20"
            let code = h.apple.issueAuthorizationCode(sub: "s", clientID: clientID, redirectURI: redirect)
            let response = try #require(await h.client.exchange(code: code, clientID: clientID, redirectURI: redirect).response)
            #expect(h.apple.lastTokenForm?["client_id"] == clientID)
            #expect(h.apple.lastTokenForm?["redirect_uri"] == redirect)
            #expect(h.apple.lastTokenForm?["code"] == code)
            let refreshToken = try #require(response.refreshToken)
            #expect(await h.client.refresh(refreshToken: refreshToken, clientID: clientID).response != nil)
            #expect(await h.client.revoke(token: refreshToken + "+&= ü", clientID: clientID) == .success)
            #expect(h.apple.revokedTokens == [refreshToken + "+&= ü"])
        }
    }

    /// The simulator refuses what is not a form, and grant types it does not know.
    @Test func theSimulatorWantsAFormAndAKnownGrantType() async throws {
        try await AppleTokenHarness.with { h in
            let secret = try h.client.secrets.secret(for: Self.clientID)
            func post(_ body: String, contentType: String) async throws -> (Int, String) {
                var request = HTTPClientRequest(url: h.server.baseURL + "/auth/token")
                request.method = .POST
                request.headers.add(name: "Content-Type", value: contentType)
                request.body = .bytes(ByteBuffer(string: body))
                let response = try await h.httpClient.execute(request, timeout: .seconds(5))
                return (Int(response.status.code), String(buffer: try await response.body.collect(upTo: 4096)))
            }
            let form = FormURLEncoding.encode([("client_id", Self.clientID), ("client_secret", secret), ("grant_type", "password")])
            let (status, body) = try await post(form, contentType: "application/x-www-form-urlencoded; charset=UTF-8")
            #expect(status == 400 && body == #"{"error":"unsupported_grant_type"}"#)
            let json = #"{"client_id":"\#(Self.clientID)","grant_type":"refresh_token"}"#
            let (jsonStatus, jsonBody) = try await post(json, contentType: "application/json")
            #expect(jsonStatus == 400 && jsonBody == #"{"error":"invalid_request"}"#)
            let (brokenStatus, brokenBody) = try await post("client_id=%zz", contentType: "application/x-www-form-urlencoded")
            #expect(brokenStatus == 400 && brokenBody == #"{"error":"invalid_request"}"#)
        }
    }

    /// Outcomes and responses, printed, debug-printed or dumped, show no
    /// token; neither does a refusal whose error text echoes one.
    @Test func nothingPrintedHoldsATokenOrSecret() async throws {
        try await AppleTokenHarness.with { h in
            let code = h.apple.issueAuthorizationCode(sub: "s", clientID: Self.clientID)
            let outcome = await h.client.exchange(code: code, clientID: Self.clientID)
            let response = try #require(outcome.response)
            let secrets = [response.accessToken, try #require(response.refreshToken), try #require(response.idToken), code,
                           try h.client.secrets.secret(for: Self.clientID)]
            var dumped = ""
            dump(outcome, to: &dumped)
            dump(response, to: &dumped)
            for text in [String(describing: outcome), String(reflecting: outcome), "\(response)", String(reflecting: response), dumped] {
                #expect(text.contains("Bearer"), "\(text)")
                for secret in secrets { #expect(!text.contains(secret.prefix(12)), "\(text)") }
            }

            h.apple.setTokenEndpointBehaviour(.status(400, error: "bad token \(response.accessToken)"))
            let refused = await h.client.refresh(refreshToken: try #require(response.refreshToken), clientID: Self.clientID)
            #expect(refused == .rejected(status: 400, error: nil))
            for secret in secrets { #expect(!"\(refused)".contains(secret.prefix(12))) }
        }
    }
}
