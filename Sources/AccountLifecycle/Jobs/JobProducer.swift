import AccountStore
import Logging
import ServiceLifecycle
import Synchronization

/// Claims jobs of the registered kinds, hands each claim to its kinds'
/// batch steps, and starts each job those leave on a task of its own, up
/// to `concurrency` running at a time (`JobSlots`; River's producer).
/// Between claims it sleeps until a wake-up (NOTIFY, a job or a batch step
/// finished, shutdown) or the poll interval. On graceful shutdown it stops
/// claiming, gives held jobs `shutdownGraceSeconds` to finish, then cancels
/// them and releases those that stopped, so another worker can take them at
/// once.
///
/// How much one claim takes follows what the batch steps did with the last
/// one. Jobs a batch step completes never take a slot (a kind whose first
/// step is also its last does the whole claim in one transaction), so while the
/// last claim's batch steps completed every job, a claim takes up to
/// `batchClaimLimit` and two claims' batch steps may run at once: the
/// claim's round trips and commits are shared by many jobs, and one
/// claim's batch step overlaps the next one's. Once a batch step leaves
/// jobs to run one by one, a claim takes only the slots no run holds or
/// waits for, and the next waits for its batch step: a worker never holds
/// many more jobs than it can run (which would keep them from another
/// worker).
final class JobProducer: Service, Sendable {
    struct Configuration: Sendable {
        var concurrency: Int
        var leaseSeconds: Double
        var pollSeconds: Double
        var shutdownGraceSeconds: Double
        /// The most one claim takes while batch steps complete every job.
        var batchClaimLimit = 64
        /// Claims whose batch steps run at once, likewise.
        var batchesAtOnce = 2
    }

    let configuration: Configuration
    let queue: JobQueue
    let runners: JobRunners
    let executor: JobExecutor
    let running: RunningJobs
    let slots: JobSlots
    let wakeup: Wakeup
    let logger: Logger
    private let stopping = Atomic<Bool>(false)
    /// Claims whose batch steps have not returned yet.
    private let batches = Atomic<Int>(0)
    /// The last claim's batch steps completed every job of it.
    private let batchesComplete = Atomic<Bool>(false)

    init(configuration: Configuration, queue: JobQueue, runners: JobRunners, executor: JobExecutor, running: RunningJobs,
         wakeup: Wakeup, logger: Logger) {
        self.configuration = configuration
        self.queue = queue
        self.runners = runners
        self.executor = executor
        self.running = running
        self.slots = JobSlots(configuration.concurrency)
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

    /// What the next claim may take: (jobs in all, jobs of kinds without a
    /// batch step of their own), or nil when it must wait.
    private func nextClaimLimits() -> (limit: Int, runLimit: Int)? {
        let inFlight = batches.load(ordering: .sequentiallyConsistent)
        let free = slots.unclaimed
        if batchesComplete.load(ordering: .sequentiallyConsistent) {
            guard inFlight < configuration.batchesAtOnce else { return nil }
            return (max(free, configuration.batchClaimLimit), free)
        }
        guard inFlight == 0, free > 0 else { return nil }
        return (free, free)
    }

    private func claimUntilStopped() async {
        var failures = 0
        while !stopping.load(ordering: .sequentiallyConsistent), !Task.isCancelled {
            if let (limit, runLimit) = nextClaimLimits() {
                do {
                    let jobs = try await claim(limit: limit, runLimit: runLimit)
                    if failures > 0 { logger.notice("Database reachable again; claiming jobs") }
                    failures = 0
                    if !jobs.isEmpty {
                        executor.instrumentation.claimed(jobs)
                        startBatch(jobs)
                    }
                    logger.trace("Claimed", metadata: ["jobs": "\(jobs.count)", "limit": "\(limit)"])
                    if jobs.count == limit { continue }
                } catch {
                    failures += 1
                    if failures == 1 || failures % 30 == 0 {
                        logger.warning("Cannot claim jobs; retrying", metadata: ["error": "\(safeDescription(error))"])
                    }
                    await wakeup.wait(upTo: .seconds(min(Double(failures), 5)))
                    continue
                }
            }
            // Sleep until NOTIFY, a finished job or batch step, shutdown, or the poll interval.
            logger.trace("Waiting", metadata: ["held": "\(running.count)"])
            await wakeup.wait(upTo: .seconds(configuration.pollSeconds))
        }
    }

    /// The shared claim for the kinds that use it, then each kind with a
    /// claim of its own in what is left of `runLimit` (they have no batch
    /// step: each of their jobs takes a slot), in registration order
    /// (WorkerAssembly's list). Jobs already claimed when a later claim
    /// fails are returned to run; the error is for the next round.
    private func claim(limit: Int, runLimit: Int) async throws -> [ClaimedJob] {
        let leaseSeconds = configuration.leaseSeconds
        var jobs = try await queue.claim(limit: limit, kinds: runners.sharedClaimNames, leaseSeconds: leaseSeconds)
        for runner in runners.selfClaiming where jobs.count < runLimit {
            do {
                jobs += try await runner.claim(limit: runLimit - jobs.count, leaseSeconds: leaseSeconds)
            } catch where !jobs.isEmpty {
                logger.warning("Cannot claim jobs of a kind; running those claimed",
                               metadata: ["kind": "\(type(of: runner).kind)", "error": "\(safeDescription(error))"])
                break
            }
        }
        return jobs
    }

    /// The claim's batch steps on a task of their own (the next claim need
    /// not wait for them), then a run for each job they left.
    private func startBatch(_ jobs: [ClaimedJob]) {
        batches.add(1, ordering: .sequentiallyConsistent)
        running.holdInBatch(jobs) {
            Task {
                let outcome = await self.runners.runBatchSteps(for: jobs)
                self.executor.instrumentation.completed(outcome.completed)
                let left = Set(outcome.left.map(\.lease))
                for job in jobs where !left.contains(job.lease) { self.running.finished(job.lease) }
                for job in outcome.left { self.start(job) }
                self.batchesComplete.store(outcome.left.isEmpty, ordering: .sequentiallyConsistent)
                self.batches.subtract(1, ordering: .sequentiallyConsistent)
                self.wakeup.signal()
            }
        }
    }

    /// Runs `job` once a slot is free. A job no longer held (its lease lost
    /// during the batch step, or shutdown took it) is not started.
    private func start(_ job: ClaimedJob) {
        _ = running.start(job) {
            Task {
                // Cancelled while waiting: shutdown releases it, or its lease was lost.
                guard await self.slots.acquire() else { return }
                self.running.running(job.lease)
                await self.executor.execute(job)
                self.slots.release()
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
        // rescued when the lease runs out. (A job its batch step completed
        // meanwhile is no longer `running`: the release leaves it alone.)
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
