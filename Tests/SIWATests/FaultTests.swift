import AppleSimulator
import Foundation
import Synchronization
import Testing

/// What happens when things die: the database, or siwa itself.
// A time limit: a regression that hangs (a writer waiting forever on a
// dead connection) fails its test instead of stalling the run.
@Suite("Faults", .serialized, .testDatabases, .timeLimit(.minutes(10)))
struct FaultTests {
    /// Database stopped: 503 so Apple retries. Started again: 200, without
    /// restarting siwa.
    @Test func databaseRestartAnswers503ThenRecovers() async throws {
        let database = try await TestDatabase.create(serverURL: try TestEnvironment.faultDatabaseURL)
        let siwa = try await ServerHarness.start(database: database, settings: ["SIWA_INGEST_TIMEOUT_SECONDS": "3"])
        try atTestEnd { await siwa.stop() }
        #expect(try await siwa.post(token: siwa.notification("email-enabled", sub: "before")).status == 200)
        try await pgScript("stop", "fault")
        do {
            let during = try await siwa.post(token: siwa.notification("account-deleted", sub: "during"))
            #expect(during.status == 503)
            #expect(during.reason == "unavailable")
            #expect(try await siwa.get("/readyz").status == 503)
            // A bad body is still a 400, database or not.
            #expect(try await siwa.post(body: Data("junk".utf8)).status == 400)
        }
        try await pgScript("start", "fault")

        // Apple retries the same notification; siwa reconnects by itself.
        let retry = try siwa.notification("account-deleted", sub: "during", jti: "retry-after-restart")
        var status = 0
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            status = (try? await siwa.post(token: retry).status) ?? 0
            if status == 200 { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(status == 200)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.notifications WHERE jti = 'retry-after-restart'") == 1)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = 'during'") == 1)
    }

    /// kill -9 of `siwa serve` while 16 senders post 1,000 notifications and
    /// retry every non-200 like Apple: afterwards every notification is
    /// recorded exactly once, and every acknowledged one was recorded before
    /// the kill.
    @Test func killNineLosesNothingAcknowledged() async throws {
        let database = try await TestDatabase.create()
        let apple = try AppleSimulator()
        let appleServer = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await appleServer.stop() }
        let port = try freePort()
        let environment = [
            "SIWA_DATABASE_URL": database.serveURL,
            "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
            "SIWA_APPLE_JWKS_URL": appleServer.baseURL + "/auth/keys",
            "SIWA_LOG_LEVEL": "warning",
        ]
        let types = ["email-disabled", "email-enabled", "consent-revoked", "account-deleted"]
        let tokens = try (0..<1000).map { i in
            try apple.notification(type: types[i % 4], sub: "kill9.\(i % 300)", audience: ServerHarness.clientID, jti: "k9-\(i)")
        }

        let first = try SIWAProcess(port: port, environment: environment)
        try await first.waitUntilReady()

        let acknowledged = Locked<Set<String>>([])
        let url = "http://127.0.0.1:\(port)/apple/notifications"
        // Like Apple: retry anything but 200.
        let senders = Task {
            await sendEachUntilDone(count: tokens.count, senders: 16, pause: .milliseconds(25)) { i in
                let answer = try? await HTTPAnswer.send(method: .POST, url: url, body: AppleSimulator.body(for: tokens[i]),
                                                        headers: [("Content-Type", "application/json")], timeout: .seconds(5))
                guard answer?.status == 200 else { return false }
                acknowledged.withLock { _ = $0.insert("k9-\(i)") }
                return true
            }
        }

        #expect(try await eventually(upTo: .seconds(60)) { acknowledged.withLock { $0.count } >= 300 }, "the senders got going")
        await first.kill9()
        let ackedBeforeKill = acknowledged.withLock { $0 }
        let recorded = Set(try await database.strings("SELECT jti FROM siwa.notifications"))
        #expect(ackedBeforeKill.isSubset(of: recorded), "acknowledged but not recorded: \(ackedBeforeKill.subtracting(recorded).sorted().prefix(10))")
        #expect(ackedBeforeKill.count < 1000, "the kill should land mid-run")

        let second = try SIWAProcess(port: port, environment: environment)
        try await second.waitUntilReady()
        await senders.value
        #expect(acknowledged.withLock { $0.count } == 1000)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.notifications") == 1000)
        #expect(try await database.scalar("SELECT count(DISTINCT jti) FROM siwa.notifications") == 1000)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'notification.recorded'") == 1000)
        // SIGTERM drains and exits cleanly.
        #expect(await second.terminate() == 0)
    }
}
