import AccountStore
import Foundation
import PostgresNIO
import Testing

/// The batch statement on its own, against real PostgreSQL: a group-commit
/// batch may hold several events for one user and the same `jti` twice.
@Suite("Inbox batches", .testDatabases)
struct InboxBatchTests {
    static func entry(_ jti: String, sub: String, at eventTime: Int64, _ effect: UserEffect, type: String = "email-enabled",
                      team: String = TestEnvironment.team) -> InboxEntry {
        InboxEntry(jti: jti, eventType: type, appleSub: sub, appleTeam: team, eventTime: eventTime, audience: "com.example.siwa.tests",
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

    /// A user who revokes consent gets no email back from a later event in
    /// the same batch (users row and recorded claims), and an event meeting
    /// a pending purge merges into it: a purge that has not started takes
    /// the newer type; one that has started gets a rerun mark.
    @Test func laterEventsMeetRevokedUsersAndPendingPurges() async throws {
        let database = try await TestDatabase.create()
        let logger = TestEnvironment.logger
        func claims(_ jti: String, email: String?) -> String {
            let emailField = email.map { #","email":"\#($0)""# } ?? ""
            return #"{"jti":"\#(jti)","events":{"type":"x","sub":"s"\#(emailField)}}"#
        }
        var revoke = Self.entry("r1", sub: "revoker", at: 10, UserEffect(status: .consentRevoked, enqueuePurge: true), type: "consent-revoked")
        revoke.claimsJSON = claims("r1", email: nil)
        var mail = Self.entry("r2", sub: "revoker", at: 20, UserEffect(emailForwardingEnabled: true, email: "back@privaterelay.appleid.com"))
        mail.claimsJSON = claims("r2", email: "back@privaterelay.appleid.com")
        try await database.withClient { client in
            try await client.withTransaction(logger: logger) { connection in
                _ = try await InboxWriter.record([revoke, mail], on: connection, logger: logger)
            }
        }
        #expect(try await database.strings("SELECT status || '/' || (email IS NULL)::text || '/' || email_forwarding_enabled::text FROM siwa.users WHERE apple_sub = 'revoker'")
                == ["consent_revoked/true/true"])
        #expect(try await database.scalar("SELECT count(*) FROM siwa.notifications WHERE claims::text LIKE '%@%'") == 0)
        #expect(try await database.strings("SELECT args->>'event_type' FROM siwa.jobs") == ["consent-revoked"])

        // A later deletion meets the purge before it starts: it takes the type.
        let delete = Self.entry("r3", sub: "revoker", at: 30, UserEffect(status: .deleted, enqueuePurge: true), type: "account-deleted")
        let outcomes = try await database.withClient { client in
            try await client.withTransaction(logger: logger) { connection in
                try await InboxWriter.record([delete], on: connection, logger: logger)
            }
        }
        #expect(try Self.id(outcomes[0]) > 0)
        guard case .recorded(_, let newJob) = outcomes[0] else { return }
        #expect(newJob == nil)
        #expect(try await database.strings("SELECT (args->>'event_type') || '/' || (args ? 'rerun')::text FROM siwa.jobs") == ["account-deleted/false"])
        #expect(try await database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE details->>'jti' = 'r3' AND details->>'purge_merged_into_job_id' IS NOT NULL
            """) == 1)

        // Once a step is done (retrying after a failure), a new event marks a rerun instead.
        try await database.execute("""
            UPDATE siwa.jobs SET state = 'retryable', steps_done = '{"siwa.erase_personal_data": "2026-01-01"}'
            """)
        let again = Self.entry("r4", sub: "revoker", at: 40, UserEffect(status: .deleted, enqueuePurge: true), type: "account-delete")
        try await database.withClient { client in
            try await client.withTransaction(logger: logger) { connection in
                _ = try await InboxWriter.record([again], on: connection, logger: logger)
            }
        }
        #expect(try await database.strings("SELECT (args->>'event_type') || '/' || (args->'rerun'->>'event_type') FROM siwa.jobs")
                == ["account-deleted/account-delete"])
    }
}
