import AccountStore
import Logging

/// Deletes completed and cancelled jobs past SIWA_JOB_RETENTION_DAYS
/// (discarded ones stay until someone looks; the audit trail keeps the
/// proof either way): at start, then every tenth of the retention, between
/// 1 s and a minute. Runs on the elected worker (`MaintenanceLeader`).
/// (River's JobCleaner.)
struct JobCleaner: PeriodicService {
    struct Configuration: Sendable {
        var retentionSeconds: Double
        var interval: Duration { .seconds(min(max(retentionSeconds / 10, 1), 60)) }
    }

    let configuration: Configuration
    let queue: JobQueue
    let failures: MaintenanceMetrics
    let logger: Logger

    var interval: Duration { configuration.interval }

    func runOnce() async {
        do {
            let pruned = try await queue.prune(retentionSeconds: configuration.retentionSeconds)
            if pruned > 0 { logger.info("Pruned finished jobs", metadata: ["jobs": "\(pruned)"]) }
        } catch {
            if Task.isCancelled { return }
            failures.failed(.jobCleaner)
            logger.error("Maintenance pass failed: the cleaner could not prune finished jobs; it tries again next pass",
                         metadata: ["task": "\(MaintenanceTask.jobCleaner.rawValue)", "error": "\(safeDescription(error))"])
        }
    }
}
