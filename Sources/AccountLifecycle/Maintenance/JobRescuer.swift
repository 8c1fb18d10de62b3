import AccountStore
import Logging

/// Rescues jobs whose lease ran out (their worker died, or lost the
/// database for longer than a lease): at start, then every half lease (at
/// most 30 s apart). The retry policy decides each one (run again at once,
/// or discard after its last attempt); the queue applies it, guarded by the
/// lease, so a worker that renews meanwhile keeps its job. It runs on the
/// worker that leads maintenance (`MaintenanceLeader`), for every kind's
/// jobs. A failed pass is logged at error and counted. (River's JobRescuer.)
struct JobRescuer: PeriodicService {
    struct Configuration: Sendable {
        var leaseSeconds: Double
        /// Jobs rescued per pass; more wait for the next one.
        var batchSize = 1000
        var interval: Duration { .seconds(min(leaseSeconds / 2, 30)) }
    }

    let configuration: Configuration
    let queue: JobQueue
    let retryPolicy: RetryPolicy
    /// Woken after a rescue: the rescued jobs are runnable at once.
    let wakeup: Wakeup
    let metrics: JobMetrics
    let failures: MaintenanceMetrics
    let logger: Logger

    var interval: Duration { configuration.interval }

    func runOnce() async {
        do {
            let expired = try await queue.expiredRuns(limit: configuration.batchSize)
            guard !expired.isEmpty else { return }
            let decisions = expired.map { run in
                (run: run, decision: retryPolicy.afterLeaseExpired(attempt: run.attempt, jobMaxAttempts: run.maxAttempts))
            }
            let rescued = try await queue.rescue(decisions)
            guard !rescued.isEmpty else { return }
            metrics.rescued(rescued)
            logger.notice("Rescued jobs whose worker stopped", metadata: ["jobs": "\(rescued.reduce(0) { $0 + $1.rescued })"])
            wakeup.signal()
        } catch {
            if Task.isCancelled { return }
            // At error, and counted: a rescuer that keeps failing leaves
            // dead workers' jobs stuck (SiwaMaintenanceFailing).
            failures.failed(.jobRescuer)
            logger.error("Maintenance pass failed: the rescuer could not rescue expired jobs; it tries again next pass",
                         metadata: ["task": "\(MaintenanceTask.jobRescuer.rawValue)", "error": "\(safeDescription(error))"])
        }
    }
}
