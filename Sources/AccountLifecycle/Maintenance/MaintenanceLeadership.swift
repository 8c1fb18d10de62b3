import Synchronization

/// Whether this worker leads maintenance now (`MaintenanceLeader` sets it
/// while it holds the lock). The app transfer's jobs are claimed only here
/// (TransferJobRunner), so their calls to Apple share token validation's
/// pacer on the one worker that leads, and SIWA_APPLE_REQUESTS_PER_SECOND
/// holds for the deployment however many workers run.
public final class MaintenanceLeadership: Sendable {
    private let leading = Atomic<Bool>(false)

    public init() {}

    public var isLeading: Bool { leading.load(ordering: .acquiring) }

    func set(_ value: Bool) { leading.store(value, ordering: .releasing) }
}
