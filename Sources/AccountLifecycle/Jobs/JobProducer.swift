import AccountStore
import Logging
import ServiceLifecycle
import Synchronization

/// Claims jobs of the registered kinds and starts each on a task of its
/// own, up to `concurrency` at a time (River's producer). Between claims it
/// sleeps until a wake-up (NOTIFY, a job finished or rescued, shutdown) or
/// the poll interval. On graceful shutdown it stops claiming, gives running
/// jobs `shutdownGraceSeconds` to finish, then cancels them and releases
/// those that stopped, so another worker can take them at once.
final class JobProducer: Service, Sendable {
    struct Configuration: Sendable {
        var concurrency: Int
        var leaseSeconds: Double
        var pollSeconds: Double
        var shutdownGraceSeconds: Double
    }

    let configuration: Configuration
    let queue: JobQueue
    let runners: JobRunners
    let executor: JobExecutor
    let running: RunningJobs
    let wakeup: Wakeup
    let logger: Logger
    private let stopping = Atomic<Bool>(false)

    init(configuration: Configuration, queue: JobQueue, runners: JobRunners, executor: JobExecutor, running: RunningJobs,
         wakeup: Wakeup, logger: Logger) {
        self.configuration = configuration
        self.queue = queue
        self.runners = runners
        self.executor = executor
        self.running = running
        self.wakeup = wakeup
        self.logger = logger
    }

    func run() async {
        await withGracefulShutdownHandler {
            await self.claimUntilStopped()
        } onGracefulShutdown: {
            self.stopping.store(true, ordering: .sequentiallyConsistent)
            self.wakeup.signal()
        }
        await drain()
    }

    // MARK: Claiming

    private func claimUntilStopped() async {
        var failures = 0
        while !stopping.load(ordering: .sequentiallyConsistent), !Task.isCancelled {
            let free = configuration.concurrency - running.count
            if free > 0 {
                do {
                    let jobs = try await claim(limit: free)
                    if failures > 0 { logger.notice("Database reachable again; claiming jobs") }
                    failures = 0
                    executor.instrumentation.claimed(jobs)
                    let batch = await runners.runBatchSteps(for: jobs)
                    executor.instrumentation.completed(batch.completed)
                    for job in batch.left { start(job) }
                    logger.trace("Claimed", metadata: ["jobs": "\(jobs.count)", "free": "\(free)"])
                    if jobs.count == free { continue }
                } catch {
                    failures += 1
                    if failures == 1 || failures % 30 == 0 {
                        logger.warning("Cannot claim jobs; retrying", metadata: ["error": "\(safeDescription(error))"])
                    }
                    await wakeup.wait(upTo: .seconds(min(Double(failures), 5)))
                    continue
                }
            }
            // Sleep until NOTIFY, a finished job, shutdown, or the poll interval.
            logger.trace("Waiting", metadata: ["running": "\(running.count)"])
            await wakeup.wait(upTo: .seconds(configuration.pollSeconds))
        }
    }

    /// The shared claim for the kinds that use it, then each kind with a
    /// claim of its own in the slots left (registration order, WorkerAssembly's
    /// list). Jobs already claimed when a later
    /// claim fails are returned to run; the error is for the next round.
    private func claim(limit: Int) async throws -> [ClaimedJob] {
        let leaseSeconds = configuration.leaseSeconds
        var jobs = try await queue.claim(limit: limit, kinds: runners.sharedClaimNames, leaseSeconds: leaseSeconds)
        for runner in runners.selfClaiming where jobs.count < limit {
            do {
                jobs += try await runner.claim(limit: limit - jobs.count, leaseSeconds: leaseSeconds)
            } catch where !jobs.isEmpty {
                logger.warning("Cannot claim jobs of a kind; running those claimed",
                               metadata: ["kind": "\(type(of: runner).kind)", "error": "\(safeDescription(error))"])
                break
            }
        }
        return jobs
    }

    private func start(_ job: ClaimedJob) {
        running.start(job) {
            Task {
                await self.executor.execute(job)
                self.running.finished(job.lease)
                self.wakeup.signal()
            }
        }
    }

    // MARK: Shutdown

    private func drain() async {
        let grace = configuration.shutdownGraceSeconds
        let deadline = ContinuousClock.now + .seconds(grace)
        if running.count > 0 {
            logger.info("Stopping: waiting for running jobs", metadata: ["jobs": "\(running.count)", "grace_seconds": "\(grace)"])
        }
        while running.count > 0, ContinuousClock.now < deadline, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(20))
        }
        // Cancel what is left, and release only the runs that have then
        // stopped: one still busy (cancellation is cooperative) keeps its
        // lease, so no other worker can start the same step beside it; it is
        // rescued when the lease runs out.
        var stopped: [(id: Int64, lease: String)] = []
        let stopDeadline = ContinuousClock.now + .seconds(2)  // for all of them together
        for (run, task) in running.cancelAll() {
            let left = stopDeadline - ContinuousClock.now
            if left > .zero, await withDeadline(left, { await task.value; return true }) == true { stopped.append(run) }
        }
        guard !stopped.isEmpty else { return }
        do {
            let released = try await queue.release(stopped)
            logger.notice("Released unfinished jobs for another worker", metadata: ["jobs": "\(released)"])
        } catch {
            logger.warning("Cannot release unfinished jobs; they are rescued when their leases expire",
                           metadata: ["jobs": "\(stopped.count)", "error": "\(safeDescription(error))"])
        }
    }
}
