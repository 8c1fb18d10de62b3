import Foundation
import Logging
import PostgresNIO

/// A user as the app's backend sees it (`GET /v1/users/{sub}` and the
/// sign-in answer).
public struct UserView: Sendable, Equatable {
    public let userID: Int64
    public let appleSub: String
    /// The developer team `appleSub` belongs to.
    public let appleTeam: String
    /// The client id (Apple's `aud`) of the user's latest sign-in or Apple
    /// event; nil for a user siwa knew before it kept one.
    public let clientID: String?
    public let status: String
    public let email: String?
    /// `email_verified` as the token that brought `email` said.
    public let emailVerified: Bool?
    public let isPrivateEmail: Bool?
    public let emailForwardingEnabled: Bool
    /// The names from Apple's `user` object (the first authorization, and
    /// again after a revocation).
    public let givenName: String?
    public let familyName: String?
    /// As Apple sent it (the answers read one outside 0–2 as unknown).
    public let realUserStatus: Int?
    /// `org_id`: an Apple Business account's organization.
    public let orgID: String?
    public let createdAt: Date
    public let lastSignInAt: Date?
    public let refreshTokenStored: Bool
    public let lastValidatedAt: Date?
    /// The user's latest purge (not a token-only sign-out), if any.
    public let purgeJobID: Int64?
    public let purgeState: String?
    /// A pending purge's next run: when a consent revocation's purge is due
    /// once its grace delay is over (`purgeWaiting`), or its next attempt.
    public let purgeRunAt: Date?
    /// The pending purge waits out a consent revocation's grace delay: a
    /// sign-in before `purgeRunAt` cancels it; `siwa jobs run-now` runs it now.
    public let purgeWaiting: Bool
    /// Identity tokens issued at or before this moment no longer sign the
    /// user in (their last revocation, deletion, purge or ended session).
    public let staleTokensUntil: Date?
}

/// An in-app deletion, as scheduled.
public struct DeletionScheduled: Sendable, Equatable {
    public let jobID: Int64
    public let state: String
    /// siwa holds an Apple token it will revoke before erasing; when false
    /// the app must send the user to Apple to revoke by hand.
    public let willRevoke: Bool
    /// The user was deleted and purged before: nothing new was scheduled,
    /// `jobID` is the purge that did it.
    public let alreadyPurged: Bool
}

/// Reads users and schedules in-app deletions.
public struct UserDirectory: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func user(appleSub: String, team: String) async throws -> UserView? {
        let rows = try await client.guardedQuery("""
            SELECT u.id, u.apple_sub, u.apple_team, u.client_id, u.status, u.email, u.is_private_email, u.email_forwarding_enabled,
                   u.real_user_status, u.created_at, u.last_sign_in_at,
                   tokens.stored, tokens.last_validated_at, purge.id, purge.state,
                   CASE WHEN purge.state IN ('available', 'retryable') THEN purge.run_at END,
                   coalesce(purge.state IN ('available', 'retryable', 'running') AND siwa.purge_waiting(purge.args), false),
                   u.stale_tokens_until_ms, u.email_verified, u.given_name, u.family_name, u.org_id
            FROM siwa.users AS u
            CROSS JOIN LATERAL (SELECT count(*) > 0 AS stored, max(last_validated_at) AS last_validated_at
                                FROM siwa.apple_tokens WHERE user_id = u.id) AS tokens
            LEFT JOIN LATERAL (SELECT id, state, run_at, args FROM siwa.jobs
                               WHERE args->>'apple_sub' = u.apple_sub AND args->>'apple_team' = u.apple_team
                                 AND kind = 'purge_user' AND NOT args ? 'scope'
                                 -- this account's, not a purged one's before it
                                 AND created_at >= u.created_at
                               ORDER BY id DESC LIMIT 1) AS purge ON true
            WHERE u.apple_sub = \(appleSub) AND u.apple_team = \(team)
            """, leaseWithin: .requestLease, logger: logger)
        guard let row = rows.first else { return nil }
        let (id, sub, team, clientID, status, email, isPrivate, forwarding, realUserStatus, created, lastSignIn, stored, validated, jobID, state,
             runAt, waiting, staleUntil, verified, givenName, familyName, orgID) =
            try row.decode((Int64, String, String, String?, String, String?, Bool?, Bool, Int16?, Date, Date?, Bool, Date?, Int64?, String?,
                            Date?, Bool, Int64?, Bool?, String?, String?, String?).self)
        return UserView(userID: id, appleSub: sub, appleTeam: team, clientID: clientID, status: status, email: email, emailVerified: verified, isPrivateEmail: isPrivate,
                        emailForwardingEnabled: forwarding, givenName: givenName, familyName: familyName,
                        realUserStatus: realUserStatus.map(Int.init), orgID: orgID, createdAt: created,
                        lastSignInAt: lastSignIn, refreshTokenStored: stored, lastValidatedAt: validated,
                        purgeJobID: jobID, purgeState: state, purgeRunAt: runAt, purgeWaiting: waiting,
                        staleTokensUntil: staleUntil.map { Date(timeIntervalSince1970: Double($0) / 1000) })
    }

    /// Apple: "you have a sixty (60) days transfer period from the date you
    /// complete the app transfer": how long a moved sub is answered.
    public static let movedSubAnsweredDays = 60

    /// The sub and team a user moved to from `oldSub` in an app transfer
    /// (sql/023's siwa.user_moves), within `movedSubAnsweredDays` of the
    /// move; nil otherwise. By the old sub alone: after the move the app's
    /// settings name the new team, not the one the old sub was in.
    public func newSub(movedFrom oldSub: String) async throws -> (sub: String, team: String)? {
        let rows = try await client.guardedQuery("""
            SELECT new_sub, new_team FROM siwa.user_moves
            WHERE old_sub = \(oldSub) AND moved_at > now() - make_interval(days => \(Int32(Self.movedSubAnsweredDays)))
            ORDER BY moved_at DESC LIMIT 1
            """, leaseWithin: .requestLease, logger: logger)
        guard let row = rows.first else { return nil }
        let (sub, team) = try row.decode((String, String).self)
        return (sub, team)
    }

    /// Marks the user deleted and enqueues their purge (merged with a
    /// pending one, as for Apple's deletion events). nil: unknown sub.
    /// The deletion is sql/025's `siwa.delete_user_as`, the one `siwa users
    /// delete` makes too (as the admin's role), audited by the API key.
    public func scheduleDeletion(appleSub: String, team: String, apiKeyName: String) async throws -> DeletionScheduled? {
        let rows = try await client.guardedQuery("""
            SELECT user_found, job_id, job_state, will_revoke, already_purged
            FROM siwa.delete_user_for_api(\(appleSub), \(team), \(apiKeyName))
            """, leaseWithin: .requestLease, logger: logger)
        return try UserDeletion.decode(rows)
    }
}
