import Synchronization

/// Start times for calls at most `perSecond` a second, evenly spaced and
/// never bunched after an idle spell (no burst allowance): the cap holds
/// over any one-second window. `siwa worker` makes one
/// (SIWA_APPLE_REQUESTS_PER_SECOND) for every call to Apple it paces: token
/// validation's and the app transfer's jobs', both on the worker that leads
/// maintenance, so the cap holds for the deployment.
public final class Pacer: Sendable {
    private let spacing: Duration
    private let next = Mutex<ContinuousClock.Instant?>(nil)

    public init(perSecond: Int) { spacing = .seconds(1) / max(perSecond, 1) }

    /// When the next call may start (now or later); reserves that slot.
    public func nextStart() -> ContinuousClock.Instant {
        next.withLock { next in
            let slot = max(next ?? .now, .now)
            next = slot + spacing
            return slot
        }
    }
}
