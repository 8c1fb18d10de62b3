import AccountStore
import Foundation
import Testing

/// How a purge or a token-only sign-out merges into the user's pending
/// `purge_user` job: siwa.enqueue_purge (sql/008), which the inbox
/// statement, the in-app deletion and the token validator all call. One
/// case per rule, each on a user of its own who holds an Apple token.
@Suite("Purge merges", .testDatabases)
struct PurgeMergeTests {
    struct Case: Sendable {
        let name: String
        /// The pending job's args, state and steps done (nil: none pending).
        var pending: (args: String, state: String, steps: String)?
        let event: String
        var jti: String?
        let tokensOnly: Bool
        var renotify = true
        var extra = "{}"
        /// The job's args afterwards, its `apple_sub` and `apple_team` aside; a moment
        /// siwa took (`tokens_before`) reads "now".
        let expected: String
    }

    static let cases: [Case] = [
        Case(name: "a purge, nothing pending", event: "account-delete", jti: "n1", tokensOnly: false,
             expected: #"{"event_type": "account-delete", "jti": "n1"}"#),
        Case(name: "a sign-out, nothing pending", event: "consent-revoked", jti: "n1", tokensOnly: true,
             expected: #"{"event_type": "consent-revoked", "jti": "n1", "scope": "tokens", "tokens_before": "now"}"#),
        Case(name: "a sign-out into a pending purge: covered",
             pending: (#"{"event_type": "account-delete", "jti": "p"}"#, "available", "{}"),
             event: "consent-revoked", jti: "n1", tokensOnly: true,
             expected: #"{"event_type": "account-delete", "jti": "p"}"#),
        Case(name: "a sign-out into a pending sign-out: the later revocation's moment",
             pending: (#"{"event_type": "consent-revoked", "jti": "p", "scope": "tokens", "tokens_before": "2000-01-01T00:00:00Z"}"#, "retryable", "{}"),
             event: "token-invalid-grant", tokensOnly: true, renotify: false,
             expected: #"{"event_type": "token-invalid-grant", "scope": "tokens", "tokens_before": "now"}"#),
        Case(name: "a sign-out into a running sign-out: one follows it",
             pending: (#"{"event_type": "consent-revoked", "jti": "p", "scope": "tokens", "tokens_before": "2000-01-01T00:00:00Z"}"#, "running", "{}"),
             event: "consent-revoked", jti: "n1", tokensOnly: true,
             expected: #"{"event_type": "consent-revoked", "jti": "p", "scope": "tokens", "tokens_before": "2000-01-01T00:00:00Z", "rerun_tokens": {"event_type": "consent-revoked", "jti": "n1", "tokens_before": "now"}}"#),
        Case(name: "a sign-out into a running sign-out a purge follows: covered",
             pending: (#"{"event_type": "consent-revoked", "scope": "tokens", "tokens_before": "2000-01-01T00:00:00Z", "rerun": {"event_type": "app-deletion", "jti": null}}"#, "running", "{}"),
             event: "consent-revoked", jti: "n1", tokensOnly: true,
             expected: #"{"event_type": "consent-revoked", "scope": "tokens", "tokens_before": "2000-01-01T00:00:00Z", "rerun": {"event_type": "app-deletion", "jti": null}}"#),
        Case(name: "a deletion into a pending sign-out: it becomes the purge",
             pending: (#"{"event_type": "consent-revoked", "jti": "p", "scope": "tokens", "tokens_before": "2000-01-01T00:00:00Z"}"#, "available", "{}"),
             event: "app-deletion", tokensOnly: false, renotify: false, extra: #"{"api_key": "backend"}"#,
             expected: #"{"event_type": "app-deletion", "api_key": "backend"}"#),
        Case(name: "a purge into a running sign-out: it follows",
             pending: (#"{"event_type": "consent-revoked", "jti": "p", "scope": "tokens", "tokens_before": "2000-01-01T00:00:00Z"}"#, "running", "{}"),
             event: "token-invalid-grant", tokensOnly: false, renotify: false,
             expected: #"{"event_type": "consent-revoked", "jti": "p", "scope": "tokens", "tokens_before": "2000-01-01T00:00:00Z", "rerun": {"event_type": "token-invalid-grant", "jti": null}}"#),
        Case(name: "Apple's event into a pending purge: the downstream hears of it",
             pending: (#"{"event_type": "consent-revoked", "jti": "p"}"#, "available", "{}"),
             event: "account-delete", jti: "n1", tokensOnly: false,
             expected: #"{"event_type": "account-delete", "jti": "n1"}"#),
        Case(name: "Apple's event into a purge with steps done: a rerun",
             pending: (#"{"event_type": "consent-revoked", "jti": "p"}"#, "retryable", #"{"siwa.erase_personal_data": "2000-01-01"}"#),
             event: "account-delete", jti: "n1", tokensOnly: false,
             expected: #"{"event_type": "consent-revoked", "jti": "p", "rerun": {"event_type": "account-delete", "jti": "n1"}}"#),
        Case(name: "a deletion at Apple into a purge waiting out its grace delay: the wait ends",
             pending: (#"{"event_type": "consent-revoked", "jti": "p", "purge_after": "2999-01-01T00:00:00Z"}"#, "available",
                       #"{"apple.revoke_tokens": "2000-01-01T00:00:00Z"}"#),
             event: "account-delete", jti: "n1", tokensOnly: false,
             expected: #"{"event_type": "account-delete", "jti": "n1"}"#),
        Case(name: "an in-app deletion into a purge waiting out its grace delay: the wait ends",
             pending: (#"{"event_type": "consent-revoked", "jti": "p", "purge_after": "2999-01-01T00:00:00Z"}"#, "running", "{}"),
             event: "app-deletion", tokensOnly: false, renotify: false, extra: #"{"api_key": "backend"}"#,
             expected: #"{"event_type": "app-deletion", "api_key": "backend"}"#),
        Case(name: "a sign-out into a purge waiting out its grace delay: covered",
             pending: (#"{"event_type": "consent-revoked", "jti": "p", "purge_after": "2999-01-01T00:00:00Z"}"#, "available", "{}"),
             event: "consent-revoked", jti: "n1", tokensOnly: true,
             expected: #"{"event_type": "consent-revoked", "jti": "p", "purge_after": "2999-01-01T00:00:00Z"}"#),
        Case(name: "a second revocation into a purge waiting out its grace delay, its tokens revoked: covered",
             pending: (#"{"event_type": "consent-revoked", "jti": "p", "purge_after": "2999-01-01T00:00:00Z"}"#, "available",
                       #"{"apple.revoke_tokens": "2000-01-01T00:00:00Z"}"#),
             event: "consent-revoked", jti: "n1", tokensOnly: false, extra: #"{"purge_after": "2999-02-01T00:00:00Z"}"#,
             expected: #"{"event_type": "consent-revoked", "jti": "p", "purge_after": "2999-01-01T00:00:00Z"}"#),
        Case(name: "a grace purge into a running sign-out: it follows, with its delay",
             pending: (#"{"event_type": "consent-revoked", "jti": "p", "scope": "tokens", "tokens_before": "2000-01-01T00:00:00Z"}"#, "running", "{}"),
             event: "consent-revoked", jti: "n1", tokensOnly: false, extra: #"{"purge_after": "2999-01-01T00:00:00Z"}"#,
             expected: #"{"event_type": "consent-revoked", "jti": "p", "scope": "tokens", "tokens_before": "2000-01-01T00:00:00Z", "rerun": {"event_type": "consent-revoked", "jti": "n1", "purge_after": "2999-01-01T00:00:00Z"}}"#),
        Case(name: "siwa's own request into a running purge: covered",
             pending: (#"{"event_type": "account-delete", "jti": "p"}"#, "running", "{}"),
             event: "app-deletion", tokensOnly: false, renotify: false, extra: #"{"api_key": "backend"}"#,
             expected: #"{"event_type": "account-delete", "jti": "p"}"#),
    ]

    @Test func eachRule() async throws {
        let db = try await TestDatabase.create()
        for (index, rule) in Self.cases.enumerated() {
            let sub = "merge.\(index)"
            try await db.execute("""
                INSERT INTO siwa.users (apple_sub, apple_team) VALUES ('\(sub)', 'TEAM123456');
                INSERT INTO siwa.apple_tokens (user_id, client_id, key_id, refresh_token, validate_after)
                SELECT id, 'app', 'k1', '\\x01', now() FROM siwa.users WHERE apple_sub = '\(sub)';
                """)
            if let pending = rule.pending {
                try await db.execute("""
                    INSERT INTO siwa.jobs (kind, args, state, steps_done)
                    VALUES ('purge_user', '\(pending.args)'::jsonb || '{"apple_sub": "\(sub)", "apple_team": "TEAM123456"}',
                            '\(pending.state)', '\(pending.steps)')
                    """)
            }
            let jti = rule.jti.map { "'\($0)'" } ?? "NULL"
            try await OpenConnection.with(db.serveConfiguration) { connection in
                try await connection.run("""
                    SELECT * FROM siwa.enqueue_purge('\(sub)', 'TEAM123456', '\(rule.event)', \(jti), \(rule.tokensOnly), \(rule.renotify), '\(rule.extra)')
                    """)
            }
            // The moments siwa takes are written with a UTC offset; the cases' own with Z.
            let found = try await db.strings("""
                SELECT regexp_replace((args - 'apple_sub' - 'apple_team')::text, '"[0-9-]{10}T[0-9:.]+[+-][0-9:]{5}"', '"now"', 'g')
                FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)'
                """)
            let matches = try await db.strings("""
                SELECT (regexp_replace((args - 'apple_sub' - 'apple_team')::text, '"[0-9-]{10}T[0-9:.]+[+-][0-9:]{5}"', '"now"', 'g')::jsonb
                        = '\(rule.expected)'::jsonb)::text
                FROM siwa.jobs WHERE args->>'apple_sub' = '\(sub)' AND args->>'apple_team' = 'TEAM123456'
                """)
            #expect(matches == ["true"], "\(rule.name): \(found)")
        }
    }

    /// A sign-out for a user who holds no token enqueues nothing.
    @Test func aSignOutWithoutATokenEnqueuesNothing() async throws {
        let db = try await TestDatabase.create()
        try await db.execute("INSERT INTO siwa.users (apple_sub, apple_team) VALUES ('tokenless', 'TEAM123456')")
        try await OpenConnection.with(db.serveConfiguration) { connection in
            try await connection.run("SELECT * FROM siwa.enqueue_purge('tokenless', 'TEAM123456', 'consent-revoked', 'n1', true, true)")
        }
        #expect(try await db.scalar("SELECT count(*) FROM siwa.jobs") == 0)
    }
}
