import AccountStore
import AppleSignIn
import Foundation

/// What siwa does when Apple says a user revoked consent
/// (`SIWA_ON_CONSENT_REVOKED`).
///
/// Apple sends `consent-revoked` when a user stops using Sign in with Apple
/// with the app (Settings > Apple ID > Sign in with Apple > Stop using). The
/// `sub` stays the same and the user may sign in again, so by default this is
/// a sign-out: the user's Apple tokens are void and go, their data stays.
/// Operators whose policy treats it as a deletion request choose `purge`.
public enum ConsentRevokedPolicy: String, Sendable, CaseIterable {
    /// Status `consent_revoked`, Apple tokens deleted, data kept.
    case signOut = "sign_out"
    /// As for an account deletion: the whole purge plan runs.
    case purge
}

/// Decides what each event type does to the store. The store applies the
/// effect with the ordering rules (newest email state wins, deleted is final).
public struct EventRouter: Sendable {
    public var onConsentRevoked: ConsentRevokedPolicy

    public init(onConsentRevoked: ConsentRevokedPolicy = .signOut) {
        self.onConsentRevoked = onConsentRevoked
    }

    public func effect(of event: AppleEvent) -> UserEffect {
        switch event.knownType {
        case .emailDisabled:
            UserEffect(emailForwardingEnabled: false, email: event.email, isPrivateEmail: event.isPrivateEmail)
        case .emailEnabled:
            UserEffect(emailForwardingEnabled: true, email: event.email, isPrivateEmail: event.isPrivateEmail)
        case .consentRevoked:
            UserEffect(status: .consentRevoked, enqueuePurge: onConsentRevoked == .purge)
        case .accountDelete, .accountDeleted:
            // Apple's account deletion: always a purge, whatever the policy.
            UserEffect(status: .deleted, enqueuePurge: true)
        case nil:
            // A type this version does not know: recorded, nothing else.
            .none
        }
    }

    public func entry(for notification: AppleNotification) -> InboxEntry {
        InboxEntry(
            jti: notification.jti,
            eventType: notification.event.type,
            appleSub: notification.event.sub,
            eventTime: notification.event.eventTime,
            audience: notification.audience,
            issuedAt: notification.issuedAt,
            claimsJSON: String(decoding: notification.claimsJSON, as: UTF8.self),
            effect: effect(of: notification.event)
        )
    }
}
