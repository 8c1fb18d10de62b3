import Foundation
import Testing

/// `SIWA_ON_CONSENT_REVOKED`: a revoked consent is a sign-out by default
/// (the user may come back with the same sub and their data), a purge when
/// the operator says so. An account deletion always purges.
@Suite("Consent policy", .testDatabases)
struct ConsentPolicyTests {
    @Test func signOutByDefaultKeepsTheUsersData() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        let db = siwa.database
        let sub = "signout.\(UUID().uuidString)"
        let t0 = Date().addingTimeInterval(-60)
        #expect(try await siwa.post(token: siwa.notification("email-enabled", sub: sub, eventTime: t0,
                                                             email: "kept@privaterelay.appleid.com")).status == 200)
        let answer = try await siwa.post(token: siwa.notification("consent-revoked", sub: sub, eventTime: t0.addingTimeInterval(1)))
        #expect(answer.status == 200)
        #expect(answer.json["status"] as? String == "recorded")

        // Signed out, not a tombstone: the status changes, the data stays, no purge.
        #expect(try await db.strings("SELECT status || '/' || (email IS NOT NULL)::text FROM siwa.users WHERE apple_sub = '\(sub)'")
                == ["consent_revoked/true"])
        #expect(try await db.scalar("SELECT count(*) FROM siwa.jobs") == 0)
        // The notification is the app's record of the event, and the audit row says no purge was made.
        #expect(try await db.strings("SELECT event_type FROM siwa.notifications WHERE apple_sub = '\(sub)' ORDER BY id")
                == ["email-enabled", "consent-revoked"])
        #expect(try await db.strings("""
            SELECT details->>'purge' FROM siwa.audit_log
            WHERE action = 'notification.recorded' AND apple_sub = '\(sub)' AND details->>'event_type' = 'consent-revoked'
            """) == ["false"])

        // A later account deletion still purges.
        #expect(try await siwa.post(token: siwa.notification("account-deleted", sub: sub)).status == 200)
        #expect(try await db.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["deleted"])
        #expect(try await db.strings("SELECT args->>'event_type' FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)'") == ["account-deleted"])
    }

    @Test func purgePolicyEnqueuesAPurge() async throws {
        let siwa = try await ServerHarness.start(settings: ["SIWA_ON_CONSENT_REVOKED": "purge"])
        try atTestEnd { await siwa.stop() }
        let sub = "purged.\(UUID().uuidString)"
        #expect(try await siwa.post(token: siwa.notification("consent-revoked", sub: sub)).status == 200)
        #expect(try await siwa.database.strings("SELECT status FROM siwa.users WHERE apple_sub = '\(sub)'") == ["consent_revoked"])
        #expect(try await siwa.database.strings("SELECT args->>'event_type' || '/' || state FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)'")
                == ["consent-revoked/available"])
        #expect(try await siwa.database.strings("""
            SELECT details->>'purge' FROM siwa.audit_log WHERE action = 'notification.recorded' AND apple_sub = '\(sub)'
            """) == ["true"])
    }

    @Test func aMisspelledPolicyStopsStartUpWithOneLine() async throws {
        let result = try await runSIWA(["serve"], environment: [
            "SIWA_DATABASE_URL": "postgres://u@127.0.0.1:9/x", "SIWA_APPLE_CLIENT_IDS": "app", "SIWA_ON_CONSENT_REVOKED": "delete",
        ])
        #expect(result.status == 2)
        #expect(result.output == "siwa: SIWA_ON_CONSENT_REVOKED: expected one of sign_out, purge, got 'delete'\n", "\(result.output)")
    }
}
