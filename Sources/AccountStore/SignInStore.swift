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
    /// The user as stored (what the sign-in answer shows).
    case stored(userID: Int64, isNewUser: Bool, email: String?, isPrivateEmail: Bool?, realUserStatus: Int?)
    /// The user's purge is pending or running: signing in now would hand
    /// the app an account that is about to be erased.
    case deletionInProgress
    /// The user's row changed since `prepare`: prepare (and seal) again.
    case again
}

/// The earlier answer to a retried sign-in (same authorization code).
public struct SignInReplay: Sendable, Equatable {
    public let userID: Int64
    public let appleSub: String
    public let isNewUser: Bool
    public let refreshTokenStored: Bool

    /// From siwa.sign_in_replay's columns (all NULL: no earlier answer).
    init?(_ columns: (Int64?, String?, Bool?, Bool?)) {
        guard let userID = columns.0, let appleSub = columns.1, let isNewUser = columns.2, let stored = columns.3 else { return nil }
        self.userID = userID
        self.appleSub = appleSub
        self.isNewUser = isNewUser
        self.refreshTokenStored = stored
    }
}

/// Where sign-in is stored, in two database calls (sql/006): `prepare`
/// before Apple is called (the user's ids, the earlier answer for the
/// code), and `store` after, one transaction that upserts the user, stores
/// the sealed tokens and the code's hash, and audits it.
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

    /// The first answer for this code, when it was stored less than ten
    /// minutes ago (siwa.sign_in_replay, sql/008, which `prepare` asks too).
    public func replay(codeSHA256: Data) async throws -> SignInReplay? {
        let rows = try await client.guardedQuery("""
            SELECT user_id, apple_sub, is_new_user, refresh_token_stored
            FROM siwa.sign_in_replay(\(codeSHA256), \(Int32(Self.replayWindowSeconds)))
            """, logger: logger)
        return try rows.first.flatMap { try SignInReplay($0.decode((Int64?, String?, Bool?, Bool?).self)) }
    }

    /// What a sign-in needs before Apple is called: the user's current id,
    /// a fresh id (for a new account), and the earlier answer for this code.
    public struct Prepared: Sendable {
        public let currentID: Int64?
        public let freshID: Int64
        public let replay: SignInReplay?
    }

    public func prepare(appleSub: String, codeSHA256: Data?) async throws -> Prepared {
        let rows = try await client.guardedExecute(
            SignInPrepareStatement(appleSub: appleSub, codeSHA256: codeSHA256, replayWindowSeconds: Int32(Self.replayWindowSeconds)),
            logger: logger)
        guard let (current, fresh, replayID, replaySub, replayNew, replayStored) = rows.first else {
            throw SignInStoreError("siwa.sign_in_prepare answered nothing")
        }
        return Prepared(currentID: current, freshID: fresh, replay: SignInReplay((replayID, replaySub, replayNew, replayStored)))
    }

    /// Upserts the user, stores the tokens and the code's hash, and audits
    /// it: one call of `siwa.sign_in` (sql/006), one round trip, one
    /// transaction.
    /// - Parameter seal: seals Apple's tokens for a user id (called for the
    ///   current id and the fresh one; the function stores the one that
    ///   applies); nil when no authorization code was exchanged.
    public func store(_ r: SignInRecord, prepared: Prepared,
                      seal: (@Sendable (Int64) throws -> SealedTokenPair)?) async throws -> SignInStoreOutcome {
        let forCurrent = try prepared.currentID.flatMap { id in try seal?(id) }
        let forFresh = try seal?(prepared.freshID)
        let rows = try await client.guardedExecute(
            SignInStatement(record: r, prepared: prepared, forCurrent: forCurrent, forFresh: forFresh,
                            validationPeriodHours: validationPeriodHours),
            logger: logger)
        guard let (outcome, userID, isNew, email, isPrivate, realUserStatus) = rows.first else {
            throw SignInStoreError("siwa.sign_in answered nothing")
        }
        switch (outcome, userID, isNew) {
        case ("stored", let userID?, let isNew?):
            return .stored(userID: userID, isNewUser: isNew, email: email, isPrivateEmail: isPrivate,
                           realUserStatus: realUserStatus.map(Int.init))
        case ("deletion_in_progress", _, _):
            return .deletionInProgress
        case ("again", _, _):
            return .again
        default:
            throw SignInStoreError("siwa.sign_in answered '\(outcome)'")
        }
    }
}

public struct SignInStoreError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
