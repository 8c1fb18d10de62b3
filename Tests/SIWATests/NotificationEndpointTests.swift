import AccountStore
import AppleSimulator
import Foundation
import Testing

/// POST /apple/notifications end to end: real HTTP, real PostgreSQL,
/// notifications signed by the Apple simulator's RSA keys.
@Suite("Notification endpoint", .testDatabases)
struct NotificationEndpointTests {
    @Test func eachTypeUpdatesTheStore() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        let db = siwa.database
        let sub = "001234.\(UUID().uuidString).0001"
        let t0 = Date().addingTimeInterval(-100)

        var answer = try await siwa.post(token: siwa.notification("email-disabled", sub: sub, eventTime: t0, email: "x@privaterelay.appleid.com"))
        #expect(answer.status == 200)
        #expect(answer.json["status"] as? String == "recorded")
        #expect(try await db.strings("SELECT email_forwarding_enabled::text FROM siwa.users WHERE apple_sub = '\(sub)'") == ["false"])

        answer = try await siwa.post(token: siwa.notification("email-enabled", sub: sub, eventTime: t0.addingTimeInterval(10)))
        #expect(answer.status == 200)
        #expect(try await db.strings("SELECT email_forwarding_enabled::text FROM siwa.users WHERE apple_sub = '\(sub)'") == ["true"])

        answer = try await siwa.post(token: siwa.notification("consent-revoked", sub: sub, eventTime: t0.addingTimeInterval(20)))
        #expect(answer.status == 200)
        #expect(try await db.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["consent_revoked"])
        // By default the purge waits out the grace delay (ConsentPolicyTests).
        #expect(try await db.scalar("""
            SELECT count(*) FROM siwa.jobs WHERE kind = 'purge_user' AND args->>'apple_sub' = '\(sub)' AND siwa.purge_waiting(args)
            """) == 1)

        // Both spellings of the deletion event.
        for type in ["account-delete", "account-deleted"] {
            let other = "00999.\(UUID().uuidString).\(type)"
            answer = try await siwa.post(token: siwa.notification(type, sub: other))
            #expect(answer.status == 200)
            #expect(try await db.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(other)'") == ["deleted"])
            #expect(try await db.scalar("SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = '\(other)' AND state = 'available'") == 1)
        }
        #expect(try await db.scalar("SELECT count(*) FROM siwa.notifications") == 5)
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'notification.recorded'") == 5)
        // The audit trail holds no email address.
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE details::text LIKE '%@%'") == 0)
    }

    @Test func duplicateJTIIsAcceptedAndChangesNothing() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        let db = siwa.database
        let sub = "dup.\(UUID().uuidString)"
        let token = try siwa.notification("account-deleted", sub: sub, jti: "dup-jti-1")
        #expect(try await siwa.post(token: token).status == 200)
        let snapshot = try await db.strings("""
            SELECT (SELECT count(*) FROM siwa.notifications)::text || '/' || (SELECT count(*) FROM siwa.jobs)::text || '/' ||
                   (SELECT count(*) FROM siwa.audit_log)::text || '/' || (SELECT updated_at FROM siwa.users WHERE apple_sub = '\(sub)')::text
            """)
        let again = try await siwa.post(token: token)
        #expect(again.status == 200)
        #expect(again.json["status"] as? String == "duplicate")
        // Another token with the same jti (Apple redelivering) is a duplicate too.
        let redelivery = try await siwa.post(token: siwa.notification("email-enabled", sub: sub, jti: "dup-jti-1"))
        #expect(redelivery.json["status"] as? String == "duplicate")
        let after = try await db.strings("""
            SELECT (SELECT count(*) FROM siwa.notifications)::text || '/' || (SELECT count(*) FROM siwa.jobs)::text || '/' ||
                   (SELECT count(*) FROM siwa.audit_log)::text || '/' || (SELECT updated_at FROM siwa.users WHERE apple_sub = '\(sub)')::text
            """)
        #expect(after == snapshot)
    }

    @Test func olderEmailEventNeverOverwritesNewerState() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        let sub = "order.\(UUID().uuidString)"
        let now = Date()
        // Apple delivers the newer event first.
        #expect(try await siwa.post(token: siwa.notification("email-enabled", sub: sub, eventTime: now)).status == 200)
        #expect(try await siwa.post(token: siwa.notification("email-disabled", sub: sub, eventTime: now.addingTimeInterval(-60))).status == 200)
        #expect(try await siwa.database.strings("SELECT email_forwarding_enabled::text FROM siwa.users WHERE apple_sub = '\(sub)'") == ["true"])
        // Both are recorded in the inbox all the same.
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.notifications WHERE apple_sub = '\(sub)'") == 2)
    }

    @Test func deletedUserIsNeverRevived() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        let sub = "gone.\(UUID().uuidString)"
        let now = Date()
        #expect(try await siwa.post(token: siwa.notification("account-deleted", sub: sub, eventTime: now)).status == 200)
        #expect(try await siwa.post(token: siwa.notification("email-disabled", sub: sub, eventTime: now.addingTimeInterval(5), email: "a@b.c")).status == 200)
        #expect(try await siwa.post(token: siwa.notification("consent-revoked", sub: sub, eventTime: now.addingTimeInterval(9))).status == 200)
        let row = try await siwa.database.strings(
            "SELECT status || '/' || email_forwarding_enabled::text || '/' || (email IS NULL)::text FROM siwa.users WHERE apple_sub = '\(sub)'")
        #expect(row == ["deleted/true/true"])
        // The late event's email address is not kept in the inbox either.
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.notifications WHERE apple_sub = '\(sub)' AND claims::text LIKE '%@%'") == 0)
    }

    @Test func unknownSubIsRecordedAndPurged() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        let sub = "never-seen.\(UUID().uuidString)"
        #expect(try await siwa.post(token: siwa.notification("account-delete", sub: sub)).status == 200)
        #expect(try await siwa.database.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["deleted"])
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)'") == 1)
    }

    @Test func unknownTypeIsRecordedWithoutEffects() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        let sub = "future.\(UUID().uuidString)"
        let answer = try await siwa.post(token: siwa.notification("account-upgraded", sub: sub))
        #expect(answer.status == 200)
        #expect(answer.json["status"] as? String == "recorded")
        #expect(try await siwa.database.strings("SELECT event_type FROM siwa.notifications WHERE apple_sub = '\(sub)'") == ["account-upgraded"])
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.jobs") == 0)
        #expect(try await siwa.database.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["active"])
    }

    @Test func twoDeletionEventsMakeOnePendingJob() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        let sub = "twice.\(UUID().uuidString)"
        // Concurrently, so both may land in the same group-commit batch.
        async let a = siwa.post(token: siwa.notification("consent-revoked", sub: sub))
        async let b = siwa.post(token: siwa.notification("account-deleted", sub: sub))
        async let c = siwa.post(token: siwa.notification("account-delete", sub: sub))
        let statuses = try await [a.status, b.status, c.status]
        #expect(statuses == [200, 200, 200])
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.notifications WHERE apple_sub = '\(sub)'") == 3)
        #expect(try await siwa.database.scalar("""
            SELECT count(*) FROM siwa.jobs WHERE kind = 'purge_user' AND args->>'apple_sub' = '\(sub)'
            AND state IN ('available', 'running', 'retryable')
            """) == 1)
        #expect(try await siwa.database.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["deleted"])
    }

    @Test func healthReadinessAndMetrics() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        #expect(try await siwa.get("/healthz").status == 200)
        let ready = try await siwa.get("/readyz")
        #expect(ready.status == 200)
        #expect(ready.json["apple_keys"] as? String == "loaded")
        _ = try await siwa.post(token: siwa.notification("email-enabled", sub: "m.\(UUID().uuidString)"))
        _ = try await siwa.post(body: Data("nope".utf8))
        let metrics = try await siwa.getMetrics().text
        #expect(metrics.contains(#"siwa_notifications_total{outcome="recorded",type="email-enabled"} 1"#))
        #expect(metrics.contains(#"siwa_notifications_total{outcome="rejected",type="none"} 1"#))
        #expect(metrics.contains("siwa_notification_request_duration_seconds_bucket"))
        // The purge queue, read at scrape time.
        try await siwa.database.execute("INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{\"apple_sub\": \"m1\", \"apple_team\": \"TEAM123456\"}')")
        let queue = try await siwa.getMetrics().text
        #expect(queue.contains(#"siwa_jobs{kind="purge_user",state="available"} 1"#), "\(queue)")
        #expect(queue.contains(#"siwa_jobs{kind="purge_user",state="discarded"} 0"#))
        // Each kind siwa makes has its series from the start, deliveries too.
        #expect(queue.contains(#"siwa_jobs{kind="app_event",state="discarded"} 0"#), "\(queue)")
        #expect(queue.contains("siwa_jobs_oldest_runnable_seconds"))
    }
}
