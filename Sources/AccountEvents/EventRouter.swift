import AccountStore
import AppleSignIn
import Foundation

/// Decides what each event type does to the store. The store applies the
/// effect with the ordering rules (newest email state wins, deleted is final).
public enum EventRouter {
    public static func effect(of event: AppleEvent) -> UserEffect {
        switch event.knownType {
        case .emailDisabled:
            UserEffect(emailForwardingEnabled: false, email: event.email, isPrivateEmail: event.isPrivateEmail)
        case .emailEnabled:
            UserEffect(emailForwardingEnabled: true, email: event.email, isPrivateEmail: event.isPrivateEmail)
        case .consentRevoked:
            // The user stopped using Sign in with Apple with this app: their
            // data must go, and their Apple tokens are void.
            UserEffect(status: .consentRevoked, enqueuePurge: true)
        case .accountDelete, .accountDeleted:
            UserEffect(status: .deleted, enqueuePurge: true)
        case nil:
            // A type this version does not know: recorded, nothing else.
            .none
        }
    }

    public static func entry(for notification: AppleNotification) -> InboxEntry {
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
