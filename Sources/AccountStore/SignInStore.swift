import Foundation
import Logging
import PostgresNIO

/// A verified sign-in, as it is stored: the user's claims from the
/// identity token, the names from Apple's `user` object (first authorization
/// only), and the tokens Apple returned for the authorization code.
public struct SignInRecord: Sendable {
    public var appleSub: String
    public var clientID: String
    public var email: String?
    public var isPrivateEmail: Bool?
    public var givenName: String?
    public var familyName: String?
    public var realUserStatus: Int?
    /// The identity token's `iat` (Apple's clock): a consent revocation or
    /// an email event older than it changes nothing.
    public var signedInAt: Date
    /// SHA-256 of the authorization code (for the retry answer), nil when none was given.
    public var codeSHA256: Data?
    /// The API key the app's backend called with, for the audit trail.
    public var apiKeyName: String

    public init(appleSub: String, clientID: String, email: String?, isPrivateEmail: Bool?, givenName: String?,
                familyName: String?, realUserStatus: Int?, signedInAt: Date, codeSHA256: Data?, apiKeyName: String) {
        self.appleSub = appleSub
        self.clientID = clientID
        self.email = email
        self.isPrivateEmail = isPrivateEmail
        self.givenName = givenName
        self.familyName = familyName
        self.realUserStatus = realUserStatus
        self.signedInAt = signedInAt
        self.codeSHA256 = codeSHA256
        self.apiKeyName = apiKeyName
    }
}

/// Tokens sealed for one row (`TokenKeyRing.seal` with the row's user id
/// and client id as associated data).
public struct SealedTokenPair: Sendable {
    public var keyID: String
    public var refreshToken: Data
    public var accessToken: Data?
    public var accessExpiresIn: Int?

    public init(keyID: String, refreshToken: Data, accessToken: Data?, accessExpiresIn: Int?) {
        self.keyID = keyID
        self.refreshToken = refreshToken
        self.accessToken = accessToken
        self.accessExpiresIn = accessExpiresIn
    }
}

public enum SignInStoreOutcome: Sendable, Equatable {
    case stored(userID: Int64, isNewUser: Bool)
    /// The user's purge is pending or running: signing in now would hand
    /// the app an account that is about to be erased.
    case deletionInProgress
}

/// The earlier answer to a retried sign-in (same authorization code).
public struct SignInReplay: Sendable, Equatable {
    public let userID: Int64
    public let appleSub: String
    public let isNewUser: Bool
    public let refreshTokenStored: Bool
}

/// Where sign-in is stored: one transaction per sign-in that upserts the
/// user, stores the sealed tokens and the code's hash, and audits it.
public struct SignInStore: Sendable {
    /// A retried sign-in within this long gets the first answer again.
    public static let replayWindowSeconds = 600

    let client: PostgresClient
    let logger: Logger
    /// Hours between two validations of a refresh token (the first is due
    /// one period after it is stored, with up to a quarter of jitter).
    let validationPeriodHours: Int

    public init(client: PostgresClient, validationPeriodHours: Int, logger: Logger) {
        self.client = client
        self.validationPeriodHours = validationPeriodHours
        self.logger = logger
    }

    /// The first answer for this code, when it was stored less than ten minutes ago.
    public func replay(codeSHA256: Data) async throws -> SignInReplay? {
        let rows = try await client.guardedQuery("""
            SELECT user_id, apple_sub, is_new_user, refresh_token_stored FROM siwa.sign_in_codes
            WHERE code_sha256 = \(codeSHA256) AND created_at > now() - make_interval(secs => \(Self.replayWindowSeconds)::float8)
            """, logger: logger)
        guard let row = rows.first else { return nil }
        let (userID, sub, isNew, stored) = try row.decode((Int64, String, Bool, Bool).self)
        return SignInReplay(userID: userID, appleSub: sub, isNewUser: isNew, refreshTokenStored: stored)
    }

    /// Upserts the user and stores the tokens, in one transaction.
    /// - Parameter seal: seals Apple's tokens for the user's row (its id is
    ///   known only here); nil when no authorization code was exchanged.
    public func store(_ record: SignInRecord,
                      seal: (@Sendable (Int64) throws -> SealedTokenPair)?) async throws -> SignInStoreOutcome {
        let period = validationPeriodHours
        return try await client.withGuardedTransaction(logger: logger) { [logger] connection in
            guard let (userID, isNew) = try await Self.upsertUser(record, on: connection, logger: logger) else {
                return .deletionInProgress
            }
            if let seal {
                let sealed = try seal(userID)
                try await connection.query("""
                    INSERT INTO siwa.apple_tokens AS t (user_id, client_id, key_id, refresh_token, access_token,
                                                        access_expires_at, validate_after)
                    VALUES (\(userID), \(record.clientID), \(sealed.keyID), \(sealed.refreshToken), \(sealed.accessToken),
                            now() + make_interval(secs => \(sealed.accessExpiresIn.map(Double.init))::float8),
                            now() + make_interval(hours => \(Int32(clamping: period))::integer) * (1 + random() / 4))
                    ON CONFLICT (user_id, client_id) DO UPDATE SET
                        key_id = excluded.key_id, refresh_token = excluded.refresh_token,
                        access_token = excluded.access_token, access_expires_at = excluded.access_expires_at,
                        stored_at = now(), last_validated_at = NULL, validate_after = excluded.validate_after,
                        validation_failures = 0
                    """, logger: logger)
            }
            if let code = record.codeSHA256 {
                try await connection.query("""
                    INSERT INTO siwa.sign_in_codes (code_sha256, user_id, apple_sub, is_new_user, refresh_token_stored)
                    VALUES (\(code), \(userID), \(record.appleSub), \(isNew), \(seal != nil))
                    ON CONFLICT (code_sha256) DO NOTHING
                    """, logger: logger)
            }
            try await connection.query("""
                INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
                VALUES ('api', 'user.signed_in', \(record.appleSub),
                        jsonb_build_object('user_id', \(userID), 'api_key', \(record.apiKeyName)::text, 'is_new_user', \(isNew),
                                           'client_id', \(record.clientID)::text, 'refresh_token_stored', \(seal != nil)))
                """, logger: logger)
            return .stored(userID: userID, isNewUser: isNew)
        }
    }

    /// The user's row for this sign-in, locked: (id, is new), or nil while
    /// a purge of the user is pending (or a deletion was never carried out).
    ///
    /// A user seen before keeps their id when their data is there (active,
    /// or signed out by a consent revocation under `sign_out`). A user whose
    /// data was purged starts a new account on the same row: a new id (the
    /// old one stays in the audit trail, with the tombstone's history), no
    /// names, status active.
    static func upsertUser(_ r: SignInRecord, on connection: PostgresConnection, logger: Logger) async throws -> (Int64, Bool)? {
        let signedIn = Int64((r.signedInAt.timeIntervalSince1970 * 1000).rounded())
        // Twice at most: a concurrent first sign-in of the same user may
        // insert the row between our look and our insert.
        for _ in 0..<2 {
            // The lock first, on its own: a sign-in that waited for a
            // concurrent deletion gets the row it left, and the pending-purge
            // check below, a statement of its own, sees the job it enqueued
            // (one statement would read the jobs as they were before the wait).
            let found = try await connection.query("""
                SELECT id, status, purged_at IS NOT NULL FROM siwa.users WHERE apple_sub = \(r.appleSub) FOR UPDATE
                """, logger: logger).collect()
            if let row = found.first {
                let (id, status, purged) = try row.decode((Int64, String, Bool).self)
                let pending = try await connection.query("""
                    SELECT EXISTS (SELECT FROM siwa.jobs WHERE kind = 'purge_user' AND args->>'apple_sub' = \(r.appleSub)
                                   AND state IN ('available', 'running', 'retryable')
                                   -- a token-only sign-out, unless a deletion marked it for a rerun
                                   AND (NOT args ? 'scope' OR args ? 'rerun'))
                    """, logger: logger).collect()
                if try pending.first?.decode(Bool.self) == true { return nil }
                if purged {
                    return (try await restart(id, previousStatus: status, r, signedIn: signedIn, on: connection, logger: logger), true)
                }
                // Deleted, its purge neither pending nor done (discarded or
                // cancelled): the data is still here and must go first.
                if status == "deleted" { return nil }
                try await connection.query("""
                    UPDATE siwa.users SET status = 'active', status_event_time = \(signedIn),
                        email = coalesce(\(r.email), email), is_private_email = coalesce(\(r.isPrivateEmail), is_private_email),
                        email_event_time = CASE WHEN \(r.email)::text IS NULL THEN email_event_time
                                                ELSE greatest(email_event_time, \(signedIn)) END,
                        given_name = coalesce(given_name, \(r.givenName)), family_name = coalesce(family_name, \(r.familyName)),
                        real_user_status = coalesce(\(r.realUserStatus.map(Int16.init)), real_user_status),
                        last_sign_in_at = now(), updated_at = now()
                    WHERE id = \(id)
                    """, logger: logger)
                return (id, false)
            }
            let inserted = try await connection.query("""
                INSERT INTO siwa.users (apple_sub, status, status_event_time, email, is_private_email, email_event_time,
                                        given_name, family_name, real_user_status, last_sign_in_at)
                VALUES (\(r.appleSub), 'active', \(signedIn), \(r.email), \(r.isPrivateEmail),
                        CASE WHEN \(r.email)::text IS NULL THEN NULL ELSE \(signedIn) END,
                        \(r.givenName), \(r.familyName), \(r.realUserStatus.map(Int16.init)), now())
                ON CONFLICT (apple_sub) DO NOTHING
                RETURNING id
                """, logger: logger).collect()
            if let row = inserted.first { return (try row.decode(Int64.self), true) }
        }
        throw SignInStoreError("the user's row appeared and vanished during sign-in")
    }

    private static func restart(_ id: Int64, previousStatus: String, _ r: SignInRecord, signedIn: Int64,
                                on connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        let rows = try await connection.query("""
            WITH restarted AS (
                UPDATE siwa.users SET id = DEFAULT, status = 'active', status_event_time = \(signedIn),
                    email = \(r.email), is_private_email = \(r.isPrivateEmail), email_forwarding_enabled = true,
                    email_event_time = \(signedIn), given_name = \(r.givenName), family_name = \(r.familyName),
                    real_user_status = \(r.realUserStatus.map(Int16.init)), last_sign_in_at = now(), purged_at = NULL,
                    created_at = now(), updated_at = now()
                WHERE id = \(id)
                RETURNING id
            ), audit AS (
                INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
                SELECT 'api', 'user.account_restarted', \(r.appleSub),
                       jsonb_build_object('user_id', restarted.id, 'previous_user_id', \(id), 'previous_status', \(previousStatus)::text)
                FROM restarted
            )
            SELECT id FROM restarted
            """, logger: logger).collect()
        guard let row = rows.first else { throw SignInStoreError("the user's row vanished during sign-in") }
        return try row.decode(Int64.self)
    }
}

public struct SignInStoreError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
