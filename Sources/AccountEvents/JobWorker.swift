import AccountStore
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// `siwa worker`: claims purge jobs and runs them, up to `concurrency` at a
/// time. Wakes on NOTIFY (the jobs table's insert trigger) and polls as a
/// fallback; extends the leases of running jobs; rescues jobs whose worker
/// died; prunes old finished jobs. On graceful shutdown it stops claiming,
/// gives running jobs `shutdownGrace` to finish, then cancels and releases
/// the rest so another worker can take them at once.
public final class JobWorker: Service, Sendable {
    public struct Options: Sendable {
        public var concurrency = 4
        public var leaseSeconds = 60.0
        public var retryBaseSeconds = 15.0
        public var maxAttempts = 25
        public var retentionSeconds = 30.0 * 86400
        public var pollSeconds = 2.0
        public var shutdownGraceSeconds = 30.0
        /// The longest one attempt may run. Past it the run is cancelled and
        /// counted as a failed attempt (retried after the backoff), and the
        /// heartbeat no longer renews its lease, so a run that does not stop
        /// is rescued when the lease runs out.
        public var maxRunSeconds = 900.0
        public init() {}
    }

    let client: PostgresClient
    let queue: JobQueue
    let runner: PurgeJobRunner
    /// The app's deliveries (`app_event` jobs), when SIWA_APP_WEBHOOK_URL is set.
    let deliveries: AppEventDelivery?
    let options: Options
    let metrics: JobMetrics
    let logger: Logger
    /// Runs before the first claim (the schema check); an error stops the worker.
    let prepare: @Sendable () async throws -> Void
    private let wakeup = Wakeup()
    private let running = RunningJobs()
    private let stopping = Atomic<Bool>(false)

    public init(client: PostgresClient, queue: JobQueue, runner: PurgeJobRunner, deliveries: AppEventDelivery? = nil,
                options: Options, metrics: JobMetrics = .disabled, logger: Logger,
                prepare: @escaping @Sendable () async throws -> Void = {}) {
        self.prepare = prepare
        self.deliveries = deliveries
        self.metrics = metrics
        self.client = client
        self.queue = queue
        self.runner = runner
        self.options = options
        self.logger = logger
    }

    public func run() async throws {
        try await prepare()
        logger.info("Worker started", metadata: ["worker": "\(queue.worker)", "concurrency": "\(options.concurrency)"])
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.listenForWakeups() }
            group.addTask { await self.keepLeases() }
            group.addTask { await self.maintain() }
            await withGracefulShutdownHandler {
                await self.claimUntilStopped()
            } onGracefulShutdown: {
                self.stopping.store(true, ordering: .sequentiallyConsistent)
                self.wakeup.signal()
            }
            await self.drain()
            group.cancelAll()
        }
    }

    // MARK: Claiming

    private func claimUntilStopped() async {
        var failures = 0
        while !stopping.load(ordering: .sequentiallyConsistent), !Task.isCancelled {
            let free = options.concurrency - running.count
            if free > 0 {
                do {
                    var jobs = try await queue.claim(limit: free, kind: PurgeJobRunner.kind, leaseSeconds: options.leaseSeconds)
                    if failures > 0 { logger.notice("Database reachable again; claiming jobs") }
                    failures = 0
                    metrics.claimed(jobs)
                    for job in await runner.runBuiltInStep(for: jobs) { start(job) }
                    // Purges first; the app's deliveries take the slots left.
                    if let deliveries, jobs.count < free {
                        let events = try await deliveries.claim(limit: free - jobs.count, leaseSeconds: options.leaseSeconds)
                        metrics.claimed(events)
                        for event in events { start(event) }
                        jobs += events
                    }
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
            await wakeup.wait(upTo: .seconds(options.pollSeconds))
        }
    }

    private func start(_ job: ClaimedJob) {
        running.start(job) {
            Task {
                await self.execute(job)
                self.running.finished(job.lease)
                self.wakeup.signal()
            }
        }
    }

    private func execute(_ job: ClaimedJob) async {
        let metadata: Logger.Metadata = ["job": "\(job.id)", "attempt": "\(job.attempt)"]
        do {
            switch try await runWithinMaxRunTime(job) {
            case .completed:
                metrics.completed(kind: job.kind)
                logger.info("Job completed", metadata: metadata)
            case .leaseLost:
                logger.warning("Lease lost; another worker will finish the job", metadata: metadata)
            }
        } catch {
            // Cancelled: shutdown (the job is released) or lease lost.
            if Task.isCancelled { return }
            let failure = error as? StepFailure ?? PurgeJobRunner.failure("-", error)
            let delay = Backoff.delay(attempt: job.attempt, baseSeconds: options.retryBaseSeconds)
            do {
                let outcome = try await queue.fail(job, step: failure.step, error: failure.detail, auditError: failure.summary,
                                                   delaySeconds: delay, maxAttempts: failure.permanent ? 0 : options.maxAttempts)
                var details = metadata
                details["step"] = "\(failure.step ?? "-")"
                details["error"] = "\(failure.summary)"
                switch outcome {
                case .retryable: metrics.retried(kind: job.kind)
                case .discarded: metrics.discarded(kind: job.kind)
                case .leaseLost: break
                }
                switch outcome {
                case .retryable: logger.warning("Job failed; will retry", metadata: details.merging(["in_seconds": "\(Int(delay.rounded(.up)))"]) { $1 })
                case .discarded: logger.error("Job discarded after its last attempt", metadata: details)
                case .leaseLost: logger.warning("Job failed after its lease was lost", metadata: details)
                }
            } catch {
                // The job keeps its lease until it expires, then is rescued.
                logger.warning("Cannot record a failed attempt; the job will be rescued when its lease expires",
                               metadata: metadata.merging(["error": "\(safeDescription(error))"]) { $1 })
            }
        }
    }

    /// Runs the job for at most `maxRunSeconds`. Past that the run is
    /// cancelled, and waited for (every step stops promptly when cancelled:
    /// its database connection is closed, its HTTP request dropped), so the
    /// failure is recorded only once nothing of this run is still going on.
    private func runWithinMaxRunTime(_ job: ClaimedJob) async throws -> JobRunOutcome {
        let limit = options.maxRunSeconds
        let runner = self.runner
        let deliveries = job.kind == AppEventDelivery.kind ? self.deliveries : nil
        return try await withThrowingTaskGroup(of: JobRunOutcome?.self) { group in
            group.addTask {
                if let deliveries { return try await deliveries.run(job) }
                return try await runner.run(job)
            }
            group.addTask {
                try await Task.sleep(for: .seconds(limit))
                return nil
            }
            var timedOut = false
            do {
                while let event = try await group.next() {
                    if let outcome = event {
                        group.cancelAll()
                        return outcome
                    }
                    // The time is up: stop the run and wait for it.
                    timedOut = true
                    group.cancelAll()
                }
            } catch {
                group.cancelAll()
                guard timedOut, !Task.isCancelled else { throw error }
            }
            let text = "timed out: the attempt ran past SIWA_JOB_MAX_RUN_SECONDS (\(limit.formattedSeconds) s) and was stopped"
            throw StepFailure(step: nil, detail: text, summary: text, permanent: false)
        }
    }

    // MARK: Background duties

    /// LISTEN on a connection of its own; reconnects after a database restart
    /// (and wakes the claimer then, for anything enqueued meanwhile).
    private func listenForWakeups() async {
        while !Task.isCancelled {
            do {
                // Guarded: the wait ends when the connection closes or the
                // worker stops, whatever the notification stream does.
                try await client.withGuardedConnection { [wakeup] connection in
                    try await connection.listen(on: JobQueue.wakeChannel) { notifications in
                        wakeup.signal()
                        for try await _ in notifications { wakeup.signal() }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                logger.debug("LISTEN connection lost; polling until it is back", metadata: ["error": "\(safeDescription(error))"])
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// Extends the leases of running jobs every third of a lease; a job whose
    /// lease was lost (rescued after a long database outage) is cancelled. A
    /// run past SIWA_JOB_MAX_RUN_SECONDS keeps no lease: its own time limit
    /// has stopped it (and recorded the failed attempt); should that not
    /// have happened, the lease runs out and the rescuer counts the attempt.
    private func keepLeases() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(options.leaseSeconds / 3))
            let runs = running.runs(startedAfter: ContinuousClock.now - .seconds(options.maxRunSeconds))
            guard !runs.isEmpty, !Task.isCancelled else { continue }
            do {
                let lost = try await queue.extendLeases(runs, leaseSeconds: options.leaseSeconds)
                for run in runs where lost.contains(run.lease) && running.cancel(run.lease) != nil {
                    metrics.leaseLost()
                    logger.warning("Lease lost; stopping the job here", metadata: ["job": "\(run.id)"])
                }
            } catch {
                logger.warning("Cannot extend leases", metadata: ["error": "\(safeDescription(error))"])
            }
        }
    }

    /// Rescues expired leases (at start and every half lease, at most 30 s
    /// apart) and prunes finished jobs past their retention (at most every minute).
    private func maintain() async {
        let clock = ContinuousClock()
        var lastPrune = clock.now - .seconds(3600)
        // A tenth of the retention, between 1 s and a minute.
        let pruneInterval = Duration.seconds(min(max(options.retentionSeconds / 10, 1), 60))
        while !Task.isCancelled {
            do {
                let rescued = try await queue.rescueExpiredLeases(maxAttempts: options.maxAttempts)
                if !rescued.isEmpty {
                    metrics.rescued(rescued)
                    logger.notice("Rescued jobs whose worker stopped", metadata: ["jobs": "\(rescued.reduce(0) { $0 + $1.rescued })"])
                    wakeup.signal()
                }
                if clock.now - lastPrune >= pruneInterval {
                    lastPrune = clock.now
                    let pruned = try await queue.prune(retentionSeconds: options.retentionSeconds)
                    if pruned > 0 { logger.info("Pruned finished jobs", metadata: ["jobs": "\(pruned)"]) }
                    try await queue.pruneSignInCodes()
                }
            } catch {
                logger.debug("Maintenance skipped", metadata: ["error": "\(safeDescription(error))"])
            }
            try? await Task.sleep(for: .seconds(min(options.leaseSeconds / 2, 30)))
        }
    }

    // MARK: Shutdown

    private func drain() async {
        let deadline = ContinuousClock.now + .seconds(options.shutdownGraceSeconds)
        if running.count > 0 {
            logger.info("Stopping: waiting for running jobs", metadata: ["jobs": "\(running.count)",
                                                                          "grace_seconds": "\(options.shutdownGraceSeconds)"])
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

/// Retry n waits base × 2^(n−1) seconds, at most 6 hours, plus up to 20%
/// jitter (never below the base figure, never above the cap), so jobs that
/// failed together do not retry in lockstep.
public enum Backoff {
    public static let capSeconds = 6.0 * 3600

    public static func delay(attempt: Int, baseSeconds: Double,
                             jitter: Double = Double.random(in: 0...0.2)) -> Double {
        let exponent = Double(min(max(attempt - 1, 0), 62))
        let plain = min(baseSeconds * pow(2, exponent), capSeconds)
        return min(plain * (1 + jitter), capSeconds)
    }
}

/// Jobs running in this process, by lease (one per claim: a job claimed
/// again after its lease was lost is a new run), so the heartbeat can list
/// them and shutdown (or a lost lease) can cancel them.
final class RunningJobs: Sendable {
    typealias Run = (id: Int64, lease: String)
    private let tasks = Mutex([String: (id: Int64, started: ContinuousClock.Instant, task: Task<Void, Never>)]())

    var count: Int { tasks.withLock { $0.count } }

    /// The runs that started after `instant`.
    func runs(startedAfter instant: ContinuousClock.Instant) -> [Run] {
        tasks.withLock { $0.filter { $0.value.started > instant }.map { ($0.value.id, $0.key) } }
    }

    /// Registers the task under the lock, so it cannot finish before it is known.
    func start(_ job: ClaimedJob, _ makeTask: () -> Task<Void, Never>) {
        let now = ContinuousClock.now
        tasks.withLock { $0[job.lease] = (job.id, now, makeTask()) }
    }

    func finished(_ lease: String) {
        _ = tasks.withLock { $0.removeValue(forKey: lease) }
    }

    /// Cancels the run's task; nil if it had already finished.
    @discardableResult
    func cancel(_ lease: String) -> Task<Void, Never>? {
        guard let entry = tasks.withLock({ $0.removeValue(forKey: lease) }) else { return nil }
        entry.task.cancel()
        return entry.task
    }

    func cancelAll() -> [(Run, Task<Void, Never>)] {
        let all = tasks.withLock { tasks in
            defer { tasks.removeAll() }
            return tasks
        }
        for entry in all.values { entry.task.cancel() }
        return all.map { (($0.value.id, $0.key), $0.value.task) }
    }
}

/// A wake-up signal that is never lost: a signal with nobody waiting is
/// kept for the next wait. One waiter at a time (the claim loop).
final class Wakeup: Sendable {
    private struct State {
        var signalled = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.signalled = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns on a signal or after `timeout`, whichever comes first.
    func wait(upTo timeout: Duration) async {
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { self.signal() }
        }
        defer { timer.cancel() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.signalled {
                    state.signalled = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }
}
