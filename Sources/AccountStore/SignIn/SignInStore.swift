import Foundation
import Logging
import PostgresNIO

/// A verified sign-in, as it is stored: the user's claims from the
/// identity token, the names from Apple's `user` object (first authorization
/// only), and the tokens Apple returned for the authorization code.
public struct SignInRecord: Sendable {
    public var appleSub: String
    /// The team of `clientID`, whose sub `appleSub` is.
    public var appleTeam: String
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
    /// `email_verified`, kept with `email` (nil without an address).
    public var emailVerified: Bool?
    /// `org_id`: an Apple Business account's organization.
    public var orgID: String?
    /// `transfer_sub`: the user's identifier for the team the app moves to.
    public var transferSub: String?

    public init(appleSub: String, appleTeam: String, clientID: String, email: String?, isPrivateEmail: Bool?, givenName: String?,
                familyName: String?, realUserStatus: Int?, signedInAt: Date, codeSHA256: Data?, apiKeyName: String,
                emailVerified: Bool? = nil, orgID: String? = nil, transferSub: String? = nil) {
        self.appleSub = appleSub
        self.appleTeam = appleTeam
        self.clientID = clientID
        self.email = email
        self.isPrivateEmail = isPrivateEmail
        self.givenName = givenName
        self.familyName = familyName
        self.realUserStatus = realUserStatus
        self.signedInAt = signedInAt
        self.codeSHA256 = codeSHA256
        self.apiKeyName = apiKeyName
        self.emailVerified = emailVerified
        self.orgID = orgID
        self.transferSub = transferSub
    }
}

/// The user as stored after a sign-in: what its answer shows beside the ids.
public struct StoredProfile: Sendable, Equatable {
    public var email: String?
    public var emailVerified: Bool?
    public var isPrivateEmail: Bool?
    public var givenName: String?
    public var familyName: String?
    /// As Apple sent it (any integer; the answers read one outside 0–2 as unknown).
    public var realUserStatus: Int?

    public init(email: String? = nil, emailVerified: Bool? = nil, isPrivateEmail: Bool? = nil, givenName: String? = nil,
                familyName: String? = nil, realUserStatus: Int? = nil) {
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.givenName = givenName
        self.familyName = familyName
        self.realUserStatus = realUserStatus
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
    case stored(userID: Int64, isNewUser: Bool, profile: StoredProfile)
    /// The user's purge is pending or running: signing in now would hand
    /// the app an account that is about to be erased.
    case deletionInProgress
    /// The user's row changed since `prepare`: prepare (and seal) again.
    case again
    /// The identity token was issued at or before the user's last
    /// revocation, deletion, purge or ended session: nothing was written.
    case staleIdentityToken
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
///
/// Concurrent sign-ins share those round trips: each call goes through a
/// `RoundTripBatcher` (run it with `run()`), which makes the calls waiting
/// together as one statement. A round trip costs siwa several times the
/// CPU of the statement's own work; batched, a sign-in costs a quarter to a
/// third less. The batches of `store` are lanes by Apple user, as the
/// inbox's are.
public final class SignInStore: Sendable {
    /// A retried sign-in within this long gets the first answer again.
    public static let replayWindowSeconds = 600

    let client: PostgresClient
    let logger: Logger
    private let preparing: RoundTripBatcher<SignInPrepareStatement.Input, Prepared>
    private let storing: RoundTripBatcher<SignInStatement.Input, SignInStoreOutcome>

    /// Two lanes for `store`. Fewer lanes make bigger batches: on the
    /// sign-in benchmark (64 callers, interleaved runs of one build) siwa's
    /// CPU per sign-in was about 360 µs with 4 lanes, 320 with 2 and 315
    /// with 1. But a lane waits while
    /// its batch waits for a user's lock (a purge or a notification holding
    /// the row, up to the 5 s lock_timeout), and one lane would hold up
    /// every sign-in then.
    public static var defaultBatching: RoundTripBatching {
        var batching = RoundTripBatching()
        batching.lanes = 2
        return batching
    }

    /// - Parameters:
    ///   - validationPeriodHours: hours between two validations of a refresh
    ///     token (the first is due one period after it is stored, with up
    ///     to a quarter of jitter).
    ///   - batching: the lanes, batch size and timeout of `store` (`prepare`
    ///     has one lane).
    public init(client: PostgresClient, validationPeriodHours: Int, batching: RoundTripBatching = SignInStore.defaultBatching,
                logger: Logger) {
        self.client = client
        self.logger = logger
        // One lane: `prepare` only reads (and takes fresh ids), so it never
        // waits for a lock, and one lane makes the biggest batches.
        var preparingBatching = batching
        preparingBatching.lanes = 1
        preparing = RoundTripBatcher(options: preparingBatching, logger: logger, laneKey: \.appleSub) { inputs in
            let statement = SignInPrepareStatement(inputs: inputs, replayWindowSeconds: Int32(Self.replayWindowSeconds))
            let rows = try await client.guardedExecute(statement, logger: logger)
            return try Self.inOrder(rows, count: inputs.count, ordinal: \.0) { row in
                Prepared(currentID: row.1, freshID: row.2, replay: SignInReplay((row.3, row.4, row.5, row.6)))
            }
        }
        // A batch PostgreSQL answered with an error rolled back, and its
        // sign-ins may each be stored alone. Any other failure (the
        // connection closed, a batch answered wrongly) may follow a COMMIT:
        // then each caller is told its outcome is unknown. The answer waits
        // for COMMIT (see `guardedCommittedExecute`).
        storing = RoundTripBatcher(options: batching, logger: logger, laneKey: \.record.appleSub,
                                   retryAlone: Self.rolledBack) { inputs in
            let statement = SignInStatement(inputs: inputs, validationPeriodHours: validationPeriodHours)
            let rows = try await client.guardedCommittedExecute(statement, logger: logger)
            return try Self.inOrder(rows, count: inputs.count, ordinal: \.0) { row in
                try Self.outcome(row.1, userID: row.2, isNew: row.3,
                                 profile: StoredProfile(email: row.4, emailVerified: row.7, isPrivateEmail: row.5, givenName: row.8,
                                                        familyName: row.9, realUserStatus: row.6.map(Int.init)))
            }
        }
    }

    /// Runs the batchers until `close()`, then finishes what is queued.
    public func run() async {
        async let prepared: Void = preparing.run()
        async let stored: Void = storing.run()
        _ = await (prepared, stored)
    }

    /// Stops taking sign-ins.
    public func close() {
        preparing.close()
        storing.close()
    }

    /// Store batches that failed, and batches sent and the sign-ins in
    /// them, since start (the tests read them to see batches form).
    public var storeBatches: (failed: Int, sent: Int, signIns: Int) {
        let sent = storing.sentCounts
        return (storing.failedBatchCount, sent.batches, sent.inputs)
    }

    /// Sign-ins waiting for a store batch to take them (the tests wait for
    /// theirs to queue behind a batch held up).
    public var storesQueued: Int { storing.queuedCount }

    /// PostgreSQL answered the statement with an error: it rolled back.
    static func rolledBack(_ error: any Error) -> Bool {
        (error as? PSQLError)?.serverInfo?[.sqlState] != nil
    }

    /// The first answer for this code, when it was stored less than ten
    /// minutes ago (siwa.sign_in_replay, sql/008, which `prepare` asks too).
    public func replay(codeSHA256: Data) async throws -> SignInReplay? {
        let rows = try await client.guardedQuery("""
            SELECT user_id, apple_sub, is_new_user, refresh_token_stored
            FROM siwa.sign_in_replay(\(codeSHA256), \(Int32(Self.replayWindowSeconds)))
            """, leaseWithin: .requestLease, logger: logger)
        return try rows.first.flatMap { try SignInReplay($0.decode((Int64?, String?, Bool?, Bool?).self)) }
    }

    /// How many transactions of this role's sessions began before `instant`
    /// and still run (the batch of a sign-in whose outcome is unknown may be
    /// one of them). A role sees its own sessions in pg_stat_activity.
    public func ownTransactionsStarted(before instant: Date) async throws -> Int {
        let rows = try await client.guardedQuery("""
            SELECT count(*)::int8 FROM pg_stat_activity
            WHERE usename = current_user AND pid <> pg_backend_pid() AND xact_start < \(instant)
            """, logger: logger)
        return Int(try rows.first?.decode(Int64.self) ?? 0)
    }

    /// What a sign-in needs before Apple is called: the user's current id,
    /// a fresh id (for a new account), and the earlier answer for this code.
    public struct Prepared: Sendable {
        public let currentID: Int64?
        public let freshID: Int64
        public let replay: SignInReplay?
    }

    public func prepare(appleSub: String, team: String, codeSHA256: Data?) async throws -> Prepared {
        try await preparing.call(SignInPrepareStatement.Input(appleSub: appleSub, appleTeam: team, codeSHA256: codeSHA256))
    }

    /// Upserts the user, stores the tokens and the code's hash, and audits
    /// it: one call of `siwa.sign_in` (sql/006), in one transaction.
    /// - Parameter seal: seals Apple's tokens for a user id (called for the
    ///   current id and the fresh one; the function stores the one that
    ///   applies); nil when no authorization code was exchanged.
    /// - Throws: `SignInNotStored` when the sign-in was certainly not
    ///   stored (the tokens could not be sealed, the call was never sent, or
    ///   PostgreSQL refused it); any other error leaves the outcome unknown
    ///   (the connection closed, no answer in time, the caller cancelled),
    ///   and the sign-in may be stored all the same.
    public func store(_ r: SignInRecord, prepared: Prepared,
                      seal: (@Sendable (Int64) throws -> SealedTokenPair)?) async throws -> SignInStoreOutcome {
        let input: SignInStatement.Input
        do {
            let forCurrent = try prepared.currentID.flatMap { id in try seal?(id) }
            let forFresh = try seal?(prepared.freshID)
            input = SignInStatement.Input(record: r, prepared: prepared, forCurrent: forCurrent, forFresh: forFresh)
        } catch {
            throw SignInNotStored(cause: error)
        }
        do {
            return try await storing.call(input)
        } catch let unavailable as RoundTripUnavailable {
            throw SignInNotStored(cause: unavailable)
        } catch let late as RoundTripTimedOut where !late.sent {
            throw SignInNotStored(cause: late)
        } catch where Self.rolledBack(error) {
            throw SignInNotStored(cause: error)
        }
    }

    /// A batch's rows as outputs in the order of its inputs (each row
    /// carries its input's 1-based number).
    private static func inOrder<Row, Output>(_ rows: [Row], count: Int, ordinal: KeyPath<Row, Int32>,
                                             _ output: (Row) throws -> Output) throws -> [Output] {
        guard rows.count == count, rows.indices.allSatisfy({ Int(rows[$0][keyPath: ordinal]) == $0 + 1 }) else {
            throw SignInStoreError("a sign-in batch of \(count) answered \(rows.count) rows, or out of order")
        }
        return try rows.map(output)
    }

    private static func outcome(_ outcome: String, userID: Int64?, isNew: Bool?, profile: StoredProfile) throws -> SignInStoreOutcome {
        switch (outcome, userID, isNew) {
        case ("stored", let userID?, let isNew?):
            return .stored(userID: userID, isNewUser: isNew, profile: profile)
        case ("deletion_in_progress", _, _):
            return .deletionInProgress
        case ("again", _, _):
            return .again
        case ("stale_identity_token", _, _):
            return .staleIdentityToken
        default:
            throw SignInStoreError("siwa.sign_in answered '\(outcome)'")
        }
    }
}

/// The sign-in was certainly not stored (see `SignInStore.store`).
public struct SignInNotStored: Error, Sendable {
    public let cause: any Error
    public init(cause: any Error) { self.cause = cause }
}

public struct SignInStoreError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
