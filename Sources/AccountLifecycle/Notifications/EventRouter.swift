import AccountStore
import AppleSignIn
import Foundation

/// What siwa does when Apple says a user revoked consent
/// (`SIWA_ON_CONSENT_REVOKED`).
///
/// Apple sends `consent-revoked` when a user stops using Sign in with Apple
/// with the app. TN3194 ("Respond to credential revoked notifications") asks
/// the server to "Delete all user-related account data, including: The token
/// used for token revocation; Any user-related data stored in your app
/// servers; ..." and to "Revert the client to an unauthenticated state".
public enum ConsentRevokedPolicy: String, Sendable, CaseIterable {
    /// As TN3194 asks (the default): the user's Apple tokens revoked and
    /// deleted and the user signed out at once, the purge of their data after
    /// the grace delay (`SIWA_CONSENT_REVOKED_PURGE_DELAY_DAYS`), cancelled
    /// if they sign in again before it runs.
    case purge
    /// Status `consent_revoked`, Apple tokens revoked and deleted, data kept:
    /// for apps whose accounts live on without Apple. Departs from TN3194.
    case signOut = "sign_out"
}

/// Decides what each event type does to the store. The store applies the
/// effect with the ordering rules (newest email state wins, deleted is final).
public struct EventRouter: Sendable {
    public var onConsentRevoked: ConsentRevokedPolicy
    /// Under `purge`: how long a consent revocation's purge waits (0: at once).
    public var consentRevokedPurgeDelaySeconds: Int

    public init(onConsentRevoked: ConsentRevokedPolicy = .purge, consentRevokedPurgeDelaySeconds: Int = 0) {
        self.onConsentRevoked = onConsentRevoked
        self.consentRevokedPurgeDelaySeconds = consentRevokedPurgeDelaySeconds
    }

    public func effect(of event: AppleEvent) -> UserEffect {
        switch event.knownType {
        case .emailDisabled:
            UserEffect(emailForwardingEnabled: false, email: event.email, isPrivateEmail: event.isPrivateEmail)
        case .emailEnabled:
            UserEffect(emailForwardingEnabled: true, email: event.email, isPrivateEmail: event.isPrivateEmail)
        case .consentRevoked:
            UserEffect(status: .consentRevoked, enqueuePurge: onConsentRevoked == .purge,
                       purgeDelaySeconds: onConsentRevoked == .purge ? consentRevokedPurgeDelaySeconds : 0)
        case .accountDelete, .accountDeleted:
            // Apple's account deletion: always a purge, whatever the policy.
            UserEffect(status: .deleted, enqueuePurge: true)
        case nil:
            // A type this version does not know: recorded, nothing else.
            .none
        }
    }

    /// - Parameter team: the team of the notification's client (`aud`).
    public func entry(for notification: AppleNotification, team: String) -> InboxEntry {
        InboxEntry(
            jti: notification.jti,
            eventType: notification.event.type,
            appleSub: notification.event.sub,
            appleTeam: team,
            eventTime: notification.event.eventTime,
            audience: notification.audience,
            issuedAt: notification.issuedAt,
            claimsJSON: notification.inboxClaimsJSON,
            effect: effect(of: notification.event)
        )
    }
}
