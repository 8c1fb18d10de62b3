import Foundation
import Logging
import PostgresNIO

/// A stored refresh token claimed for validation.
public struct DueAppleToken: Sendable, Equatable {
    public let userID: Int64
    public let appleSub: String
    public let appleTeam: String
    public let clientID: String
    public let keyID: String
    public let refreshToken: Data
    /// Consecutive validations Apple could not decide before this one.
    public let failures: Int
    /// A signed-out or deleted user's token is not checked (its revocation
    /// is on the way); claiming it only moves it a period ahead, so it does
    /// not sit at the head of the due index.
    public let userIsActive: Bool
}

/// The worker's daily check of stored refresh tokens (TN3194: validate a
/// refresh token at most once a day). Claiming moves a token's next check a
/// whole period ahead before Apple is called, in the same statement that
/// picks it (`FOR UPDATE SKIP LOCKED`): two workers never take the same
/// token, and a worker killed after the call does not call again before the
/// period has passed.
public struct TokenValidationQueue: Sendable {
    let client: PostgresClient
    let periodHours: Int
    let logger: Logger

    public init(client: PostgresClient, periodHours: Int, logger: Logger) {
        self.client = client
        self.periodHours = periodHours
        self.logger = logger
    }

    /// The next check: a period ahead, plus up to a quarter of it at random,
    /// so tokens stored together drift apart instead of falling due at once.
    static let nextCheck = "now() + make_interval(hours => $2::integer) * (1 + random() / 4)"

    /// Up to `limit` due tokens, oldest due first.
    public func claimDue(limit: Int) async throws -> [DueAppleToken] {
        try await claim(where: "t.validate_after <= now()", limit: limit, sub: nil, team: nil)
    }

    /// The user's tokens, for `siwa tokens validate`: only those due unless `force`.
    public func claim(appleSub: String, team: String, force: Bool) async throws -> [DueAppleToken] {
        try await claim(where: force ? "true" : "t.validate_after <= now()", limit: 100, sub: appleSub, team: team)
    }

    private func claim(where condition: String, limit: Int, sub: String?, team: String?) async throws -> [DueAppleToken] {
        var query = PostgresQuery(unsafeSQL: """
            WITH due AS (
                SELECT t.user_id, t.client_id FROM siwa.apple_tokens AS t JOIN siwa.users AS u ON u.id = t.user_id
                WHERE \(condition) AND ($3::text IS NULL OR (u.apple_sub = $3::text AND u.apple_team = $4::text))
                ORDER BY t.validate_after
                LIMIT $1::integer
                FOR UPDATE OF t SKIP LOCKED
            )
            UPDATE siwa.apple_tokens AS t SET validate_after = \(Self.nextCheck)
            FROM due, siwa.users AS u
            WHERE t.user_id = due.user_id AND t.client_id = due.client_id AND u.id = t.user_id
            RETURNING t.user_id, u.apple_sub, u.apple_team, t.client_id, t.key_id, t.refresh_token, t.validation_failures,
                      u.status = 'active'
            """)
        query.binds.append(Int32(clamping: limit))
        query.binds.append(Int32(clamping: periodHours))
        query.binds.append(sub)
        query.binds.append(team)
        return try await client.guardedQuery(query, logger: logger).map { row in
            let (userID, sub, team, clientID, keyID, token, failures, active) =
                try row.decode((Int64, String, String, String, String, Data, Int32, Bool).self)
            return DueAppleToken(userID: userID, appleSub: sub, appleTeam: team, clientID: clientID, keyID: keyID, refreshToken: token,
                                 failures: Int(failures), userIsActive: active)
        }
    }

    /// Apple accepted the token: note it, with the new access token. Both
    /// tokens come sealed under the ring's current key (one `key_id` per
    /// row). Guarded by the refresh token claimed, so a sign-in that
    /// replaced it meanwhile is not overwritten.
    /// The answer counts in the pause's window (siwa.note_token_validation).
    public func recordValid(_ token: DueAppleToken, resealed: SealedTokenPair) async throws {
        try await client.guardedQuery("""
            WITH renewed AS (
                UPDATE siwa.apple_tokens SET last_validated_at = now(), validation_failures = 0, key_id = \(resealed.keyID),
                    refresh_token = \(resealed.refreshToken), access_token = \(resealed.accessToken),
                    access_expires_at = now() + make_interval(secs => \(resealed.accessExpiresIn.map(Double.init))::float8)
                WHERE user_id = \(token.userID) AND client_id = \(token.clientID) AND refresh_token = \(token.refreshToken)
            )
            SELECT siwa.note_token_validation(false)
            """, logger: logger)
    }

    /// Apple could not decide (5xx, 429, network): try again after a
    /// backoff (1 min doubling, at most the period), the user untouched.
    public func recordUndecided(_ token: DueAppleToken, retryAfterSeconds: Double? = nil) async throws {
        let backoff = min(60 * pow(2, Double(min(token.failures, 20))), Double(periodHours) * 3600)
        let delay = max(backoff, retryAfterSeconds ?? 0)
        try await client.guardedQuery("""
            UPDATE siwa.apple_tokens SET validation_failures = validation_failures + 1,
                validate_after = now() + make_interval(secs => \(delay)::float8)
            WHERE user_id = \(token.userID) AND client_id = \(token.clientID) AND refresh_token = \(token.refreshToken)
            """, logger: logger)
    }

    /// siwa's own credentials were refused: leave the token due again after `seconds`.
    public func postpone(_ token: DueAppleToken, seconds: Double) async throws {
        try await client.guardedQuery("""
            UPDATE siwa.apple_tokens SET validate_after = now() + make_interval(secs => \(seconds)::float8)
            WHERE user_id = \(token.userID) AND client_id = \(token.clientID) AND refresh_token = \(token.refreshToken)
            """, logger: logger)
    }

    /// Apple answered `invalid_grant` (the user revoked access, or changed
    /// their Apple Account password): siwa.record_invalid_grant (sql/015)
    /// deletes the dead token and ends the user's session (identity tokens
    /// issued until now no longer sign them in; they stay active, nothing is
    /// purged), unless this answer trips the pause.
    public func recordInvalidGrant(_ token: DueAppleToken, pausePercent: Int) async throws -> InvalidGrantOutcome {
        let rows = try await client.guardedQuery("""
            SELECT siwa.record_invalid_grant(\(token.userID), \(token.clientID), \(token.refreshToken), \(Int32(clamping: pausePercent)))
            """, logger: logger)
        let answer = try rows.first?.decode(String.self) ?? ""
        guard let outcome = InvalidGrantOutcome(rawValue: answer) else {
            throw UnexpectedAnswer(description: "siwa.record_invalid_grant answered '\(answer)'")
        }
        return outcome
    }

    /// Whether validation is paused, since when and why; nil: it runs.
    public func pause() async throws -> ValidationPause? {
        let rows = try await client.guardedQuery("""
            SELECT paused_at, coalesce(reason, '') FROM siwa.token_validation_pause WHERE paused_at IS NOT NULL
            """, logger: logger)
        return try rows.first.map { row in
            let (since, reason) = try row.decode((Date, String).self)
            return ValidationPause(since: since, reason: reason)
        }
    }
}

/// What siwa.record_invalid_grant did.
public enum InvalidGrantOutcome: String, Sendable {
    /// The token deleted, the user's session ended.
    case sessionEnded = "session_ended"
    /// Validation is paused (by this answer or before it): nothing changed.
    case paused
    /// The token was replaced or deleted meanwhile: nothing to do.
    case gone
}

/// Validation paused after too many `invalid_grant` answers.
public struct ValidationPause: Sendable, Equatable {
    public let since: Date
    public let reason: String
}

/// The database answered something this version does not know.
struct UnexpectedAnswer: Error, CustomStringConvertible {
    let description: String
}
