import AppleSimulator
import Foundation
import Testing

extension FaultTests {
    /// PostgreSQL restarted while senders keep posting: siwa answers 503
    /// meanwhile, recovers without a restart, and in the end every
    /// notification is recorded exactly once. (A writer whose connection
    /// died mid-transaction used to wait forever on its ROLLBACK, so enough
    /// of them turned siwa into a permanent 503; see GuardedConnection.swift.)
    @Test func databaseRestartUnderLoadLosesNothing() async throws {
        let database = try await TestDatabase.create(serverURL: try TestEnvironment.faultDatabaseURL)
        let siwa = try await ServerHarness.start(database: database, settings: ["SIWA_INGEST_TIMEOUT_SECONDS": "2"])
        try atTestEnd { await siwa.stop() }
        let types = ["email-disabled", "email-enabled", "consent-revoked", "account-deleted"]
        let tokens = try (0..<600).map { i in
            try siwa.notification(types[i % 4], sub: "restart.\(i % 200)", jti: "rs-\(i)")
        }
        let acknowledged = Locked(0)
        let refused = Locked(0)
        let deadline = ContinuousClock.now + .seconds(120)
        // Like Apple: retry anything but 200 (until the test's deadline).
        let senders = Task {
            await sendEachUntilDone(count: tokens.count, senders: 8, pause: .milliseconds(50), until: deadline) { i in
                guard (try? await siwa.post(token: tokens[i]))?.status == 200 else {
                    refused.withLock { $0 += 1 }
                    return false
                }
                acknowledged.withLock { $0 += 1 }
                return true
            }
        }
        #expect(try await eventually(upTo: .seconds(60)) { acknowledged.withLock { $0 } >= 150 }, "the senders got going")
        try await pgScript("stop", "fault")
        // Down until the senders have felt it (503s), however slowly they go.
        let refusedAtStop = refused.withLock { $0 }
        #expect(try await eventually(upTo: .seconds(60)) { refused.withLock { $0 } > refusedAtStop }, "no 503 while PostgreSQL was down")
        try await pgScript("start", "fault")
        let ackedAtStop = acknowledged.withLock { $0 }
        await senders.value
        #expect(ackedAtStop < tokens.count, "the outage should land while senders are posting")
        #expect(refused.withLock { $0 } > 0, "the outage should have been felt (503s)")
        #expect(ContinuousClock.now < deadline, "senders were still refused two minutes on")
        #expect(try await database.scalar("SELECT count(*) FROM siwa.notifications") == tokens.count)
        #expect(try await database.scalar("SELECT count(DISTINCT jti) FROM siwa.notifications") == tokens.count)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'notification.recorded'") == tokens.count)
        #expect(try await siwa.get("/readyz").status == 200)
    }
}
