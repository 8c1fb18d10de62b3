import AppleSimulator
import Foundation
import Hummingbird
import SIWAClient
import Testing

/// SIWAClient against a real siwa: the retry rule for 503 (docs/http-api.md:
/// the backend sends the same request again; a sign-in is answered from
/// what siwa stored, or afresh when nothing was) and the deadlines. The
/// other `/v1` suites (SignInTests, SignInWebTests, SeveralTeamsTests,
/// AccountDeletionTests, ...) call siwa through it too.
@Suite("SIWAClient", .testDatabases)
struct SIWAClientTests {
    /// Apple unavailable once: siwa answers 503 with Retry-After, the client
    /// waits and sends the same request again, and the user is signed in.
    @Test func a503IsRetriedAfterItsWait() async throws {
        let setup = try await SignInTests.Setup.start()
        try atTestEnd { await setup.server.stop() }
        setup.apple.setTokenEndpointBehaviour(.status(503))
        let client = try setup.client(retry: SIWAClient.RetryPolicy(maxAttempts: 3, defaultDelay: .seconds(1), maxDelay: .seconds(1)))
        let body = try setup.appleSignIn(sub: "001.retry.0001")
        // Apple comes back as soon as siwa has asked it once.
        let recovery = Task {
            while setup.apple.tokenRequests < 1 { try await Task.sleep(for: .milliseconds(20)) }
            setup.apple.setTokenEndpointBehaviour(.normal)
        }
        defer { recovery.cancel() }
        let started = ContinuousClock.now
        let answer = try await client.signIn(json: body)
        #expect(answer.status == 200 && answer.value?.appleSub == "001.retry.0001", "\(answer.text)")
        #expect(setup.apple.tokenRequests == 2, "one refused exchange, one that went through")
        #expect(ContinuousClock.now - started >= .seconds(1), "the client waited before the retry")
    }

    /// Apple stays away: the client stops after its attempts and throws
    /// siwa's 503, with the Retry-After siwa sent.
    @Test func theRetriesEndAndThe503IsThrown() async throws {
        let setup = try await SignInTests.Setup.start()
        try atTestEnd { await setup.server.stop() }
        setup.apple.setTokenEndpointBehaviour(.status(503))
        let client = try setup.client(retry: SIWAClient.RetryPolicy(maxAttempts: 3, defaultDelay: .milliseconds(100), maxDelay: .milliseconds(200)))
        let answer = try await client.signIn(json: try setup.appleSignIn(sub: "001.retry.0002"))
        #expect(answer.status == 503 && answer.reason == "unavailable" && answer.refusal?.retryAfterSeconds != nil, "\(answer.text)")
        #expect(setup.apple.tokenRequests == 3)
        #expect(try await setup.server.database.scalar("SELECT count(*) FROM siwa.users") == 0)
    }

    /// A wait that would end past the call's deadline is not started: siwa
    /// asks for 5 s (`Retry-After`), the call has 4, so its 503 is thrown at once.
    @Test func noWaitPastTheDeadline() async throws {
        let setup = try await SignInTests.Setup.start()
        try atTestEnd { await setup.server.stop() }
        setup.apple.setTokenEndpointBehaviour(.status(503))
        let url = try #require(URL(string: setup.server.apiURL))
        let client = SIWAClient(apiURL: url, apiKey: setup.key, configuration: .init(
            retry: SIWAClient.RetryPolicy(maxAttempts: 5, defaultDelay: .seconds(1), maxDelay: .seconds(20)),
            attemptTimeout: .seconds(30), deadline: .seconds(4)))
        let started = ContinuousClock.now
        let answer = try await client.signIn(json: try setup.appleSignIn(sub: "001.retry.0003"))
        #expect(answer.status == 503 && answer.refusal?.retryAfterSeconds == 5, "\(answer.text)")
        #expect(setup.apple.tokenRequests == 1, "no second attempt")
        #expect(ContinuousClock.now - started < .seconds(4))
    }

    /// A server that never answers: the attempt's deadline ends the call,
    /// and so does the whole call's when the answer's body stalls.
    @Test func aSilentServerTimesOut() async throws {
        let router = Router()
        // Silent for longer than either deadline, yet short enough that the
        // server's graceful stop at the test's end does not wait long for it.
        router.get("/v1/users/:sub") { _, _ -> Response in
            try await Task.sleep(for: .seconds(6))
            return Response(status: .ok)
        }
        let server = try await TestPorts.serve { try await RunningServer.start(router: router, port: $0, logger: TestEnvironment.logger) }
        try atTestEnd { await server.stop() }
        let url = try #require(URL(string: server.baseURL))
        for (attempt, deadline) in [(Duration.seconds(1), Duration.seconds(30)), (.seconds(30), .seconds(1))] {
            let client = SIWAClient(apiURL: url, apiKey: "siwa_test", configuration: .init(retry: .never, attemptTimeout: attempt, deadline: deadline))
            let started = ContinuousClock.now
            await #expect {
                _ = try await client.user(appleSub: "001.silent.0001")
            } throws: { error in
                guard case SIWAClientError.timedOut = error else { return false }
                return true
            }
            #expect(ContinuousClock.now - started < .seconds(10), "\(attempt) \(deadline)")
        }
    }

    /// The retry policy's arithmetic: Retry-After in seconds, capped; no
    /// usable header, the default.
    @Test func retryAfterIsReadAndCapped() {
        let policy = SIWAClient.RetryPolicy(maxAttempts: 3, defaultDelay: .seconds(2), maxDelay: .seconds(10))
        #expect(policy.delay(retryAfter: "5") == .seconds(5))
        #expect(policy.delay(retryAfter: " 3 ") == .seconds(3))
        #expect(policy.delay(retryAfter: "3600") == .seconds(10))
        #expect(policy.delay(retryAfter: nil) == .seconds(2))
        #expect(policy.delay(retryAfter: "-1") == .seconds(2))
        #expect(policy.delay(retryAfter: "Wed, 21 Oct 2026 07:28:00 GMT") == .seconds(2))
        #expect(SIWAClient.RetryPolicy(maxAttempts: 0).maxAttempts == 1)
    }
}
