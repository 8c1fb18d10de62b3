import AccountStore
import Logging

/// The heartbeat: extends the leases of this worker's running jobs every
/// third of a lease, and cancels a run whose lease is lost (the job was
/// rescued during a long database outage, or claimed again since). A run
/// past SIWA_JOB_MAX_RUN_SECONDS keeps no lease: its own time limit has
/// stopped it (and recorded the failed attempt); should that not have
/// happened, the lease runs out and the rescuer counts the attempt.
struct LeaseKeeper: PeriodicService {
    struct Configuration: Sendable {
        var leaseSeconds: Double
        var maxRunSeconds: Double
        /// A third of a lease: two renewals may fail before it runs out.
        var interval: Duration { .seconds(leaseSeconds / 3) }
    }

    let configuration: Configuration
    let queue: JobQueue
    let running: RunningJobs
    let metrics: JobMetrics
    let logger: Logger

    // Stops after the producer (JobWorker's order): jobs draining at
    // shutdown keep their leases.
    var interval: Duration { configuration.interval }
    var waitsFirst: Bool { true }

    func runOnce() async {
        let runs = running.runs(startedAfter: ContinuousClock.now - .seconds(configuration.maxRunSeconds))
        guard !runs.isEmpty else { return }
        do {
            let lost = try await queue.extendLeases(runs, leaseSeconds: configuration.leaseSeconds)
            for run in runs where lost.contains(run.lease) && running.cancel(run.lease) != nil {
                metrics.leaseLost()
                logger.warning("Lease lost; stopping the job here", metadata: ["job": "\(run.id)"])
            }
        } catch {
            logger.warning("Cannot extend leases", metadata: ["error": "\(safeDescription(error))"])
        }
    }
}
