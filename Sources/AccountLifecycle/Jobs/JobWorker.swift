import AccountStore
import Logging
import PostgresNIO
import ServiceLifecycle

/// `siwa worker`'s job queue: claims jobs of the registered kinds
/// (`JobRunners`) and runs them, up to `concurrency` at a time. It is a set of
/// services with one duty each, run by a ServiceGroup of their own (as
/// swift-jobs' JobService composes its processor and scheduler):
///
/// - `JobNotifier`: LISTEN, wakes the producer when a job is enqueued;
/// - `LeaseKeeper`: the heartbeat that extends running jobs' leases and
///   cancels a run whose lease is lost;
/// - `MaintenanceLeader`: on the one worker elected by the maintenance
///   lock, runs `JobRescuer` (takes back jobs whose worker died: expired
///   leases), `JobCleaner` (prunes finished jobs past their retention) and
///   the other duties it is given (the audit sealer, token validation,
///   sign-in code pruning);
/// - `JobProducer`: claims and starts jobs (each run by `JobExecutor`
///   inside `JobInstrumentation`, failures decided by `RetryPolicy`);
///   drains on shutdown.
///
/// The group shuts its services down in reverse order: on SIGTERM the
/// producer stops claiming, gives running jobs `shutdownGraceSeconds`, then
/// cancels and releases the rest, while the lease keeper still renews
/// their leases; the others stop after it. The maintenance duties start
/// after `prepare` (the schema check), as the producer does.
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

        public var retryPolicy: RetryPolicy { RetryPolicy(baseSeconds: retryBaseSeconds, maxAttempts: maxAttempts) }
    }

    /// What runs on the elected worker only, besides the rescuer and the cleaner.
    public struct Maintenance: Sendable {
        public var lock: MaintenanceLock
        /// The audit sealer, token validation.
        public var duties: [any Service]
        public var metrics: MaintenanceMetrics
        /// Set while this worker leads (the kinds that run only there read it).
        public var leadership: MaintenanceLeadership

        public init(lock: MaintenanceLock, duties: [any Service], metrics: MaintenanceMetrics,
                    leadership: MaintenanceLeadership = MaintenanceLeadership()) {
            self.lock = lock
            self.duties = duties
            self.metrics = metrics
            self.leadership = leadership
        }
    }

    let queue: JobQueue
    let options: Options
    let logger: Logger
    /// Runs before the first claim (the schema check); an error stops the worker.
    let prepare: @Sendable () async throws -> Void
    /// In start order; stopped in reverse.
    let services: [any Service]

    public init(client: PostgresClient, queue: JobQueue, runners: JobRunners, options: Options,
                metrics: JobMetrics = .disabled, maintenance: Maintenance, logger: Logger,
                prepare: @escaping @Sendable () async throws -> Void = {}) {
        self.queue = queue
        self.options = options
        self.logger = logger
        self.prepare = prepare
        metrics.expose(kinds: runners.names, steps: runners.stepNames)
        let wakeup = Wakeup()
        let running = RunningJobs()
        let executor = JobExecutor(queue: queue, runners: runners, retryPolicy: options.retryPolicy,
                                   maxRunSeconds: options.maxRunSeconds, instrumentation: JobInstrumentation(metrics: metrics, logger: logger))
        let duties: [any Service] = [
            JobRescuer(configuration: .init(leaseSeconds: options.leaseSeconds), queue: queue,
                       retryPolicy: options.retryPolicy, wakeup: wakeup, metrics: metrics,
                       failures: maintenance.metrics, logger: logger),
            JobCleaner(configuration: .init(retentionSeconds: options.retentionSeconds), queue: queue,
                       failures: maintenance.metrics, logger: logger),
        ] + maintenance.duties
        services = [
            JobNotifier(client: client, wakeup: wakeup, logger: logger),
            LeaseKeeper(configuration: .init(leaseSeconds: options.leaseSeconds, maxRunSeconds: options.maxRunSeconds),
                        queue: queue, running: running, metrics: metrics, logger: logger),
            MaintenanceLeader(lock: maintenance.lock, configuration: .init(leaseSeconds: options.leaseSeconds), duties: duties,
                              metrics: maintenance.metrics, worker: queue.worker, logger: logger,
                              leadership: maintenance.leadership),
            JobProducer(configuration: .init(concurrency: options.concurrency, leaseSeconds: options.leaseSeconds,
                                             pollSeconds: options.pollSeconds, shutdownGraceSeconds: options.shutdownGraceSeconds),
                        queue: queue, runners: runners, executor: executor, running: running, wakeup: wakeup,
                        logger: logger),
        ]
    }

    public func run() async throws {
        try await prepare()
        logger.info("Worker started", metadata: ["worker": "\(queue.worker)", "concurrency": "\(options.concurrency)"])
        // No signals of its own: the enclosing group's graceful shutdown reaches it.
        try await ServiceGroup(services: services, logger: logger).run()
    }
}
