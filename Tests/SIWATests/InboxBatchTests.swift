import AccountStore
import Foundation
import PostgresNIO
import Testing

/// The batch statement on its own, against real PostgreSQL: a group-commit
/// batch may hold several events for one user and the same `jti` twice.
@Suite("Inbox batches")
struct InboxBatchTests {
    static func entry(_ jti: String, sub: String, at eventTime: Int64, _ effect: UserEffect, type: String = "email-enabled") -> InboxEntry {
        InboxEntry(jti: jti, eventType: type, appleSub: sub, eventTime: eventTime, audience: "com.example.siwa.tests",
                   issuedAt: Date(), claimsJSON: #"{"jti":"\#(jti)"}"#, effect: effect)
    }

    @Test func roundsNeverRepeatASubOrAJTIAndKeepOrderPerSub() {
        let effect = UserEffect(emailForwardingEnabled: true)
        let entries = [Self.entry("j1", sub: "a", at: 1, effect), Self.entry("j2", sub: "b", at: 1, effect),
                       Self.entry("j3", sub: "a", at: 2, effect), Self.entry("j1", sub: "c", at: 1, effect),
                       Self.entry("j4", sub: "a", at: 3, effect), Self.entry("j5", sub: "d", at: 1, effect)]
        let rounds = RecordNotificationStatement.rounds(of: entries)
        #expect(rounds == [[0, 1, 5], [2, 3], [4]])
    }

    @Test func oneBatchWithRepeatedSubsAndJTIsAppliesEveryRule() async throws {
        let database = try await TestDatabase.create()
        let logger = TestEnvironment.logger
        let entries = [
            // Out of order within one batch: the newest email state wins.
            Self.entry("e1", sub: "mail", at: 300, UserEffect(emailForwardingEnabled: false, email: "new@privaterelay.appleid.com", isPrivateEmail: true)),
            Self.entry("e2", sub: "mail", at: 100, UserEffect(emailForwardingEnabled: true, email: "old@privaterelay.appleid.com", isPrivateEmail: false)),
            Self.entry("e3", sub: "mail", at: 200, UserEffect(emailForwardingEnabled: true)),
            // The same jti twice in one batch: the second is a duplicate.
            Self.entry("e1", sub: "other", at: 1, UserEffect(emailForwardingEnabled: false)),
            // Three deletion events for one user: one job, status deleted.
            Self.entry("d1", sub: "gone", at: 10, UserEffect(status: .consentRevoked, enqueuePurge: true), type: "consent-revoked"),
            Self.entry("d2", sub: "gone", at: 20, UserEffect(status: .deleted, enqueuePurge: true), type: "account-delete"),
            Self.entry("d3", sub: "gone", at: 30, UserEffect(emailForwardingEnabled: true, email: "late@example.com"), type: "email-enabled"),
            Self.entry("d4", sub: "gone", at: 40, UserEffect(status: .deleted, enqueuePurge: true), type: "account-deleted"),
        ]
        let outcomes = try await database.withClient { client in
            try await client.withTransaction(logger: logger) { connection in
                try await InboxWriter.record(entries, on: connection, logger: logger)
            }
        }
        #expect(outcomes.map { $0 == .duplicate } == [false, false, false, true, false, false, false, false])
        guard case .recorded(_, let firstJob) = outcomes[4], let firstJob else {
            Issue.record("the first deletion event enqueued no job: \(outcomes[4])"); return
        }
        #expect(outcomes[5] == .recorded(notificationID: try Self.id(outcomes[5]), purgeJobID: nil))

        #expect(try await database.strings("""
            SELECT email_forwarding_enabled::text || '/' || email || '/' || is_private_email::text || '/' || email_event_time
            FROM siwa.users WHERE apple_sub = 'mail'
            """) == ["false/new@privaterelay.appleid.com/true/300"])
        #expect(try await database.strings("SELECT status || '/' || status_event_time || '/' || (email IS NULL)::text FROM siwa.users WHERE apple_sub = 'gone'")
                == ["deleted/20/true"])
        #expect(try await database.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = 'other'") == 0)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.notifications") == 7)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.jobs") == 1)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE id = \(firstJob) AND args->>'apple_sub' = 'gone'") == 1)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'notification.recorded'") == 7)
        #expect(try await database.scalar("SELECT count(*) FROM siwa.audit_log WHERE (details->>'purge_job_id')::bigint = \(firstJob)") == 1)
    }

    static func id(_ outcome: InboxOutcome) throws -> Int64 {
        guard case .recorded(let id, _) = outcome else { throw TestSetupError("not recorded: \(outcome)") }
        return id
    }
}
