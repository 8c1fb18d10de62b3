import Foundation

public enum UserStatus: String, Sendable, Codable, CaseIterable {
    case active
    case consentRevoked = "consent_revoked"
    case deleted
}

/// What a verified notification does to the store. The domain layer decides
/// it (by event type); the store applies it, in one statement, with the
/// ordering rules that make late and duplicate deliveries harmless.
public struct UserEffect: Sendable, Equatable {
    /// email-enabled / email-disabled; applied only if newer than the last applied email event.
    public var emailForwardingEnabled: Bool?
    public var email: String?
    public var isPrivateEmail: Bool?
    /// consent_revoked or deleted; a deleted user is never changed again.
    public var status: UserStatus?
    /// Enqueue a `purge_user` job for the sub (one pending job per sub).
    public var enqueuePurge: Bool
    /// With `enqueuePurge`: the purge of the user's data waits this long
    /// (their Apple tokens are revoked at once); 0 runs it at once.
    public var purgeDelaySeconds: Int

    public init(emailForwardingEnabled: Bool? = nil, email: String? = nil, isPrivateEmail: Bool? = nil,
                status: UserStatus? = nil, enqueuePurge: Bool = false, purgeDelaySeconds: Int = 0) {
        self.emailForwardingEnabled = emailForwardingEnabled
        self.email = email
        self.isPrivateEmail = isPrivateEmail
        self.status = status
        self.enqueuePurge = enqueuePurge
        self.purgeDelaySeconds = purgeDelaySeconds
    }

    public static let none = UserEffect()
}

/// One verified notification, ready to be recorded.
public struct InboxEntry: Sendable {
    public var jti: String
    public var eventType: String
    public var appleSub: String
    /// The team `appleSub` belongs to (the client's: `audience`'s).
    public var appleTeam: String
    /// Milliseconds since the epoch, as Apple sends it.
    public var eventTime: Int64
    public var audience: String
    public var issuedAt: Date
    /// The verified claims the row's columns do not hold, as JSON text
    /// (`AppleNotification.inboxClaimsJSON`).
    public var claimsJSON: String
    public var effect: UserEffect

    public init(jti: String, eventType: String, appleSub: String, appleTeam: String, eventTime: Int64, audience: String,
                issuedAt: Date, claimsJSON: String, effect: UserEffect) {
        self.jti = jti
        self.eventType = eventType
        self.appleSub = appleSub
        self.appleTeam = appleTeam
        self.eventTime = eventTime
        self.audience = audience
        self.issuedAt = issuedAt
        self.claimsJSON = claimsJSON
        self.effect = effect
    }
}

public enum InboxOutcome: Sendable, Equatable {
    /// First delivery: recorded, effects applied. `purgeJobID` is set when this
    /// notification enqueued a new purge job (nil if one was already pending).
    case recorded(notificationID: Int64, purgeJobID: Int64?)
    /// The jti was recorded before; nothing changed.
    case duplicate
}
