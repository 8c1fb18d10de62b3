import Foundation
import Logging
import PostgresNIO

/// A stored Apple token row, still sealed.
public struct StoredAppleToken: Sendable, Equatable {
    public let userID: Int64
    public let appleSub: String
    public let clientID: String
    public let keyID: String
    public let refreshToken: Data
}

/// Apple's answer to one revocation, for the audit trail.
public struct TokenRevocation: Sendable {
    public let userID: Int64
    public let clientID: String
    /// The sealed token revoked: the row is deleted only if it still holds
    /// it (a sign-in may have stored a new one meanwhile).
    public let refreshToken: Data
    /// The HTTP status Apple gave (200, or 400 for a token already dead).
    public let appleStatus: Int

    public init(userID: Int64, clientID: String, refreshToken: Data, appleStatus: Int) {
        self.userID = userID
        self.clientID = clientID
        self.refreshToken = refreshToken
        self.appleStatus = appleStatus
    }
}

/// The purge's revocation step: read a user's sealed tokens, and once Apple
/// has revoked them, delete them together with the step's record.
public struct AppleTokenStore: Sendable {
    /// The step every purge (and every token-only sign-out) runs before
    /// the erase: each stored refresh token revoked at Apple, then deleted.
    public static let revokeStepName = "apple.revoke_tokens"

    let client: PostgresClient
    let queue: JobQueue
    let logger: Logger

    public init(client: PostgresClient, queue: JobQueue, logger: Logger) {
        self.client = client
        self.queue = queue
        self.logger = logger
    }

    /// The tokens of the job's user; for a token-only sign-out, those
    /// stored before its revocation was recorded (args.tokens_before, taken
    /// under the user's lock, sql/008; for a job made by hand, its
    /// creation): a token from a later sign-in is left alone. Read from the
    /// job's row here, so a malformed hand-made job fails its own step, not
    /// the worker's claim.
    public func tokens(appleSub: String, team: String, signOut job: Int64? = nil) async throws -> [StoredAppleToken] {
        let rows = try await client.guardedQuery("""
            SELECT t.user_id, u.apple_sub, t.client_id, t.key_id, t.refresh_token
            FROM siwa.users AS u JOIN siwa.apple_tokens AS t ON t.user_id = u.id
            WHERE u.apple_sub = \(appleSub) AND u.apple_team = \(team)
              AND (\(job)::bigint IS NULL OR t.stored_at < (SELECT coalesce((args->>'tokens_before')::timestamptz, created_at)
                                                            FROM siwa.jobs WHERE id = \(job)::bigint))
            ORDER BY t.client_id
            """, logger: logger)
        return try rows.map { row in
            let (userID, sub, clientID, keyID, token) = try row.decode((Int64, String, String, String, Data).self)
            return StoredAppleToken(userID: userID, appleSub: sub, clientID: clientID, keyID: keyID, refreshToken: token)
        }
    }

    /// Deletes the revoked tokens and records the step (with a
    /// `token.revoked` audit row each) in one transaction, only while the
    /// run holds its lease. false: the lease was lost, nothing changed.
    public func recordRevoked(_ revoked: [TokenRevocation], appleSub: String, team: String, step: JobStep) async throws -> Bool {
        try await queue.inStepTransaction(step) { [logger] connection in
            try await connection.query("""
                WITH gone AS (
                    DELETE FROM siwa.apple_tokens AS t
                    USING unnest(\(revoked.map(\.userID))::bigint[], \(revoked.map(\.clientID))::text[],
                                 -- bytea travels as hex (PostgresNIO binds no bytea[])
                                 \(revoked.map { $0.refreshToken.hexLowercased })::text[],
                                 \(revoked.map { Int32($0.appleStatus) })::integer[]) AS r(user_id, client_id, token, status)
                    WHERE t.user_id = r.user_id AND t.client_id = r.client_id AND t.refresh_token = decode(r.token, 'hex')
                    RETURNING t.user_id, t.client_id, r.status
                )
                INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
                SELECT 'worker', 'token.revoked', \(appleSub), \(team),
                       jsonb_build_object('job_id', \(step.jobID), 'user_id', user_id, 'client_id', client_id, 'apple_status', status)
                FROM gone
                """, logger: logger)
        }
    }
}
