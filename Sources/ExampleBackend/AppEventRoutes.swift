import Foundation
import Hummingbird
import Logging
import SIWAClient

/// `POST /siwa/events`, the URL given to siwa as SIWA_APP_WEBHOOK_URL: each
/// delivery verified (Standard Webhooks), skipped if its id was seen, else
/// acted on as docs/app-events.md says the app should, then answered 2xx.
/// A refusal is 4xx and a failure to act 5xx: siwa retries both, and holds
/// the user's later events until this one goes through.
struct AppEventRoutes: Sendable {
    let verifier: AppEventVerifier
    let seen: InMemorySeenAppEventIDs
    let accounts: Accounts
    let logger: Logger

    func register(on router: Router<BasicRequestContext>) {
        router.post("siwa/events") { request, _ -> Response in
            // siwa's envelopes are small; a larger body is no delivery of its.
            let body = Data(buffer: try await request.body.collect(upTo: 256 * 1024))
            do {
                let reception = try await verifier.receive(headers: request.headers, body: body, seen: seen) { event in
                    act(on: event)
                }
                if case .alreadySeen(let event) = reception {
                    logger.info("app event seen before", metadata: ["id": "\(event.id)", "type": "\(event.type)"])
                }
                return Response(status: .noContent)
            } catch let refusal as AppEventVerificationError {
                logger.warning("app event refused", metadata: ["reason": "\(refusal)"])
                return json(refusal == .noMatchingSignature ? .unauthorized : .badRequest, ErrorBody(error: "\(refusal)"))
            }
        }
    }

    /// What each event asks of the app's backend (docs/app-events.md,
    /// "What Apple asks of the app, event by event").
    func act(on event: AppEvent) {
        let data = event.data
        guard let sub = data.sub, let team = data.team else {
            logger.info("app event", metadata: ["id": "\(event.id)", "type": "\(event.type)"])
            return
        }
        let user = Accounts.UserKey(sub: sub, team: team)
        switch event.kind {
        case .appleEmailDisabled:
            accounts.updateUser(user) { $0.emailDeliverable = false }
        case .appleEmailEnabled:
            accounts.updateUser(user) { $0.emailDeliverable = true }
        case .appleConsentRevoked where data.olderThanSignIn == true:
            break  // the user signed in again after it: siwa ignored it too
        case .appleConsentRevoked, .consentRevoked, .appleAccountDeleted, .userDeletionRequested:
            // TN3194: delete the user's data and revert every client to an
            // unauthenticated state; siwa revokes Apple's tokens and purges.
            accounts.delete(user)
        case .tokenInvalidGrant:
            // Apple no longer honours the user's token: end the sessions,
            // keep the data; the app asks them to sign in with Apple again.
            accounts.endSessions(of: user)
        case .userTransferred:
            if let previousSub = data.previousSub, let previousTeam = data.previousTeam {
                accounts.move(Accounts.UserKey(sub: previousSub, team: previousTeam), to: user)
            }
        case .purgeCompleted:
            accounts.delete(user)  // anything left that the purge plan does not cover
        case .purgeFailed:
            logger.error("siwa's purge of a user failed: the data is not erased yet (siwa jobs show, siwa jobs retry)",
                         metadata: ["sub": "\(sub)", "job_id": "\(data.jobID ?? 0)", "step": "\(data.step ?? "")"])
        case .userSignedIn, .purgeCancelled, .test, .appleOther, .unknown:
            break  // the sign-in's own answer made the session; the others ask nothing
        }
        logger.info("app event handled", metadata: ["id": "\(event.id)", "type": "\(event.type)", "sub": "\(sub)"])
    }
}
