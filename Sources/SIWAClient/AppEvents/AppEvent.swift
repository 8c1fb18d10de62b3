import Foundation

/// One of siwa's app events, as the webhook delivers it: the envelope
/// `{"type", "timestamp", "data"}` and the `webhook-id` it came with
/// (docs/app-events.md lists every type, its `data`, and what the app should do).
public struct AppEvent: Sendable, Equatable {
    /// The `webhook-id`: the event's own id, the same on every retry and
    /// replay. Skip one you have processed (`SeenAppEventIDs`).
    public let id: String
    /// The event's type as sent (`apple.consent-revoked`, `user.signed_in`, ...).
    public let type: String
    /// When the event happened (Apple's `event_time` for Apple's events), as sent: ISO 8601, UTC.
    public let timestamp: String
    public let data: AppEventData

    /// The type, for a `switch`.
    public var kind: AppEventKind { AppEventKind(type: type) }

    /// `timestamp` as a date (nil if it is not ISO 8601).
    public var date: Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: timestamp) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: timestamp)
    }

    private struct Envelope: Decodable {
        let type: String
        let timestamp: String
        let data: AppEventData
    }

    /// Decodes a delivery's body. `AppEventVerifier.verify` calls it once the
    /// signature checks out; call it yourself only on a body already verified.
    public init(id: String, body: Data) throws {
        let envelope = try JSONDecoder().decode(Envelope.self, from: body)
        self.init(id: id, type: envelope.type, timestamp: envelope.timestamp, data: envelope.data)
    }

    public init(id: String, type: String, timestamp: String, data: AppEventData) {
        self.id = id
        self.type = type
        self.timestamp = timestamp
        self.data = data
    }
}

/// Every event type siwa sends, and what TN3194 and Apple's "Processing
/// changes for Sign in with Apple accounts" ask of the app for each
/// (docs/app-events.md quotes them).
public enum AppEventKind: Sendable, Equatable, Hashable {
    /// Apple: the user stopped forwarding from their private relay address: stop sending them email.
    case appleEmailDisabled
    /// Apple: forwarding is back on: email them again.
    case appleEmailEnabled
    /// Apple: the user stopped using Sign in with Apple with the app. Unless
    /// `data.olderThanSignIn`, act as for `consentRevoked`.
    case appleConsentRevoked
    /// Apple: the user deletes their Apple Account (`account-delete` or
    /// `account-deleted`): delete everything held for them, sessions and
    /// tokens included; siwa's purge runs (`purgeCompleted` follows).
    case appleAccountDeleted
    /// A type of Apple's that siwa does not know (recorded, no effect): log it.
    case appleOther(String)
    /// The user revoked the app (TN3194): revert every client of theirs to
    /// an unauthenticated state (end their sessions) and delete what you hold
    /// for them; siwa's purge follows at `data.purgeAfter` under `purge`.
    case consentRevoked
    /// siwa's `/v1/sign-in` signed the user in: create or refresh their record.
    case userSignedIn
    /// `DELETE /v1/users/{sub}`: treat the account as gone; `purgeCompleted` follows.
    case userDeletionRequested
    /// An app transfer moved the user to a new `sub` (`data.sub`; the old
    /// one is `data.previousSub`): key them by the new one from now on.
    case userTransferred
    /// The user's purge finished: delete what the purge plan does not cover.
    case purgeCompleted
    /// The purge was discarded after its attempts: alert someone.
    case purgeFailed
    /// A waiting purge was cancelled (the user signed in again): keep the account.
    case purgeCancelled
    /// Apple refused the user's stored refresh token; siwa ended their
    /// session: end yours and have them sign in with Apple again.
    case tokenInvalidGrant
    /// `siwa webhooks test`: answer 2xx and ignore it.
    case test
    /// A type this library does not know (a newer siwa): answer 2xx.
    case unknown(String)

    public init(type: String) {
        switch type {
        case "apple.email-disabled": self = .appleEmailDisabled
        case "apple.email-enabled": self = .appleEmailEnabled
        case "apple.consent-revoked": self = .appleConsentRevoked
        case "apple.account-delete", "apple.account-deleted": self = .appleAccountDeleted
        case "consent.revoked": self = .consentRevoked
        case "user.signed_in": self = .userSignedIn
        case "user.deletion_requested": self = .userDeletionRequested
        case "user.transferred": self = .userTransferred
        case "purge.completed": self = .purgeCompleted
        case "purge.failed": self = .purgeFailed
        case "purge.cancelled": self = .purgeCancelled
        case "token.invalid_grant": self = .tokenInvalidGrant
        case "siwa.test": self = .test
        case let other where other.hasPrefix("apple."): self = .appleOther(String(other.dropFirst(6)))
        default: self = .unknown(type)
        }
    }
}

/// An event's `data`: the user (`sub` and `team` together: Apple's subs are
/// team-scoped) and the fields of its type; a field the type does not carry
/// is nil. A field of an unexpected JSON type is nil too, never a refusal of
/// the whole event (a newer siwa may add or widen fields).
public struct AppEventData: Sendable, Equatable, Decodable {
    public var sub: String?
    public var team: String?
    public var clientID: String?
    /// siwa's id of the user (`user.*`, `token.invalid_grant`).
    public var userID: Int64?
    // Apple's events.
    public var appleType: String?
    public var jti: String?
    /// Apple's `event_time`, milliseconds since 1970.
    public var eventTime: Int64?
    public var isPrivateEmail: Bool?
    /// Only with `SIWA_APP_WEBHOOK_INCLUDE_EMAIL=true`, in Apple's email events.
    public var email: String?
    /// Whether siwa purges the user for this event.
    public var purge: Bool?
    /// When a consent revocation's purge runs (ISO 8601), under `purge` with a delay.
    public var purgeAfter: String?
    /// true: the user signed in again after this Apple event, which siwa ignored.
    public var olderThanSignIn: Bool?
    // siwa's events.
    /// `consent.revoked`: `apple` or `invalid_grant`.
    public var source: String?
    public var isNewUser: Bool?
    public var refreshTokenStored: Bool?
    public var purgeJobID: Int64?
    public var merged: Bool?
    public var previousSub: String?
    public var previousTeam: String?
    public var via: String?
    /// `token.invalid_grant`: siwa ended the user's session.
    public var sessionEnded: Bool?
    public var jobID: Int64?
    /// `all`, or `tokens` for a sign-out that revoked the tokens only.
    public var scope: String?
    public var attempts: Int?
    public var step: String?
    public var error: String?
    public var reason: String?
    public var message: String?

    enum CodingKeys: String, CodingKey {
        case sub, team, clientID = "client_id", userID = "user_id", appleType = "apple_type", jti, eventTime = "event_time"
        case isPrivateEmail = "is_private_email", email, purge, purgeAfter = "purge_after", olderThanSignIn = "older_than_sign_in"
        case source, isNewUser = "is_new_user", refreshTokenStored = "refresh_token_stored", purgeJobID = "purge_job_id", merged
        case previousSub = "previous_sub", previousTeam = "previous_team", via, sessionEnded = "session_ended", jobID = "job_id"
        case scope, attempts, step, error, reason, message
    }

    public init() {}

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func field<T: Decodable>(_ key: CodingKeys) -> T? { (try? container.decodeIfPresent(T.self, forKey: key)) ?? nil }
        sub = field(.sub)
        team = field(.team)
        clientID = field(.clientID)
        userID = field(.userID)
        appleType = field(.appleType)
        jti = field(.jti)
        eventTime = field(.eventTime)
        isPrivateEmail = field(.isPrivateEmail)
        email = field(.email)
        purge = field(.purge)
        purgeAfter = field(.purgeAfter)
        olderThanSignIn = field(.olderThanSignIn)
        source = field(.source)
        isNewUser = field(.isNewUser)
        refreshTokenStored = field(.refreshTokenStored)
        purgeJobID = field(.purgeJobID)
        merged = field(.merged)
        previousSub = field(.previousSub)
        previousTeam = field(.previousTeam)
        via = field(.via)
        sessionEnded = field(.sessionEnded)
        jobID = field(.jobID)
        scope = field(.scope)
        attempts = field(.attempts)
        step = field(.step)
        error = field(.error)
        reason = field(.reason)
        message = field(.message)
    }
}
