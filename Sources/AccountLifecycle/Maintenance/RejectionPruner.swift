import AccountStore
import Logging
import ServiceLifecycle

/// Prunes refused deliveries past SIWA_REJECTION_RETENTION_DAYS
/// (`RejectionRetention`): on the worker that leads maintenance
/// (`MaintenanceLeader`), when it starts leading and then every hour. A
/// failed pass is logged at error and counted, and tried again next hour.
public struct RejectionPruner: Service {
    let retention: RejectionRetention
    let interval: Duration
    let failures: MaintenanceMetrics
    let logger: Logger

    public init(retention: RejectionRetention, interval: Duration = .seconds(3600), failures: MaintenanceMetrics, logger: Logger) {
        self.retention = retention
        self.interval = interval
        self.failures = failures
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await runOnce()
                try? await Task.sleep(for: interval)
            }
        }
    }

    func runOnce() async {
        do {
            let pruned = try await retention.prune()
            if pruned > 0 { logger.info("Pruned refused deliveries", metadata: ["rows": "\(pruned)"]) }
        } catch {
            if Task.isCancelled { return }
            failures.failed(.rejectionPruner)
            logger.error("Maintenance pass failed: could not prune old refused deliveries; it tries again next hour",
                         metadata: ["task": "\(MaintenanceTask.rejectionPruner.rawValue)", "error": "\(safeDescription(error))"])
        }
    }
}
