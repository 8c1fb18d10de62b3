import Foundation
import Testing

extension FaultTests {
    /// PostgreSQL down: a `/v1` request whose API key must be checked in
    /// the database (the key cache goes off with its LISTEN) is answered
    /// 503 within the request's wait for a connection (`.requestLease`),
    /// not held until the pool's circuit breaker trips a minute later.
    @Test func aRequestIsAnswered503WhileTheDatabaseIsDown() async throws {
        let database = try await TestDatabase.create(serverURL: try TestEnvironment.faultDatabaseURL)
        let fixture = try SignInFixture.files()
        let server = try await ServerHarness.start(database: database, signIn: fixture)
        try atTestEnd { await server.stop() }
        let setup = SignInTests.Setup(server: server, fixture: fixture, key: try await SignInFixture.apiKey(in: database))
        #expect(try await setup.get("/v1/users/001.lease.0001").status == 404)

        try await pgScript("stop", "fault")
        try atTestEnd { try? await pgScript("start", "fault") }
        for _ in 0..<3 {
            let started = ContinuousClock.now
            let answer = try await setup.get("/v1/users/001.lease.0001")
            let waited = ContinuousClock.now - started
            #expect(answer.status == 503, "\(answer.status) \(answer.text)")
            #expect(answer.reason == "unavailable")
            // The lease's 5 s, and slack for a loaded machine; the pool alone held it 60 s.
            #expect(waited < .seconds(20), "answered after \(waited)")
        }

        try await pgScript("start", "fault")
        #expect(try await eventually(upTo: .seconds(30)) { try await setup.get("/v1/users/001.lease.0001").status == 404 },
                "back once the database is")
    }
}
