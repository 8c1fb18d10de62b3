import AccountStore
import AppleSignIn
import Foundation
import Logging
import Metrics
import Synchronization

/// Sign-ins whose store's outcome was unknown (the connection closed under
/// the batch, or no answer came in time): siwa kept Apple's refresh token
/// then, since the row may hold it. Each is checked once the database
/// answers again and the batch's transaction has surely ended: if no row
/// holds the sign-in (siwa.sign_in_replay finds no answer for its code), the
/// token is revoked at Apple, so no live grant is left that siwa does not
/// hold. The checks live in this process only (a restart drops them, and
/// the grant stays live until the user's next sign-in replaces it).
public final class UnknownSignInOutcomes: Sendable {
    let store: SignInStore
    let apple: AppleAuthClient
    let logger: Logger
    /// A sign-in's code is answered by siwa.sign_in_replay only this long
    /// after it was stored; past it nothing tells whether it was, and the
    /// check gives up (keeping the token).
    let window: Duration
    let retryInterval: Duration
    /// At most this many checks at once; more are given up at once.
    let maxPending: Int
    private let pending = Mutex(0)
    private let resolved: [Resolution: Counter]

    public enum Resolution: String, Sendable, CaseIterable {
        /// A row holds the sign-in: the token is siwa's.
        case stored
        /// Nothing was stored: the token was revoked at Apple.
        case revoked
        /// Undecided before the window closed (or too many pending): kept.
        case abandoned
    }

    public init(store: SignInStore, apple: AppleAuthClient, logger: Logger, metrics: any MetricsFactory,
                window: Duration = .seconds(SignInStore.replayWindowSeconds - 60), retryInterval: Duration = .seconds(2),
                maxPending: Int = 1000) {
        self.store = store
        self.apple = apple
        self.logger = logger
        self.window = window
        self.retryInterval = retryInterval
        self.maxPending = maxPending
        resolved = Dictionary(uniqueKeysWithValues: Resolution.allCases.map {
            ($0, Counter(label: "siwa_sign_in_unknown_outcomes_total", dimensions: [("resolution", $0.rawValue)], factory: metrics))
        })
    }

    /// Checks, in the background, whether the sign-in with this code was
    /// stored, and revokes `token` if it was not.
    func check(_ token: String, clientID: String, codeSHA256: Data) {
        let admitted = pending.withLock { count in
            guard count < maxPending else { return false }
            count += 1
            return true
        }
        guard admitted else {
            resolve(.abandoned, clientID: clientID, why: "too many sign-ins waiting for the database")
            return
        }
        let failedAt = Date()
        Task {
            let resolution = await settle(token, clientID: clientID, codeSHA256: codeSHA256, failedAt: failedAt)
            pending.withLock { $0 -= 1 }
            resolve(resolution, clientID: clientID, why: "the database did not answer within the sign-in replay window")
        }
    }

    private func settle(_ token: String, clientID: String, codeSHA256: Data, failedAt: Date) async -> Resolution {
        let deadline = ContinuousClock.now + window
        // A transaction of the batch may still run: only one that began
        // before the failure (with a margin for the two clocks) can be it.
        let batchBegan = failedAt.addingTimeInterval(5)
        while ContinuousClock.now < deadline {
            try? await Task.sleep(for: retryInterval)
            do {
                guard try await store.ownTransactionsStarted(before: batchBegan) == 0 else { continue }
                if try await store.replay(codeSHA256: codeSHA256) != nil { return .stored }
                let answer = await apple.revoke(token: token, clientID: clientID)
                logger.info("Revoked the refresh token of a sign-in that turned out not stored",
                            metadata: ["client_id": "\(clientID)", "apple": "\(answer)"])
                return .revoked
            } catch {
                continue
            }
        }
        return .abandoned
    }

    private func resolve(_ resolution: Resolution, clientID: String, why: String) {
        resolved[resolution]?.increment()
        if resolution == .abandoned {
            logger.error("A sign-in's outcome stayed unknown: its refresh token is kept, and stays live at Apple if nothing holds it (\(why))",
                         metadata: ["client_id": "\(clientID)"])
        }
    }
}
