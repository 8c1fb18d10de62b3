import AccountStore
import Logging
import PostgresNIO
import ServiceLifecycle

/// Runs the maintenance duties (the rescuer, the cleaner, the audit sealer,
/// token validation, the pruning of refused deliveries) on one worker at a time: the one holding the
/// `MaintenanceLock` (River elects its maintenance leader the same way).
/// Claiming and running jobs stays on every worker.
///
/// Every worker keeps one connection of its own for the lock and tries it
/// every `retryInterval`. The winner runs the duties and checks its
/// connection every `checkInterval`; the moment the connection closes, or a
/// check fails or goes unanswered for `MaintenanceLock.timeout`, it stops
/// them (cancelled at once, a pass in flight included), closes the
/// connection and tries again like the others. The server keeps the lock
/// until it finds the session dead (at once for a process killed, ~25 s of
/// keepalives for a network gone), which is after the leader has stopped.
/// Overlap would be harmless all the same: the rescuer's updates are
/// guarded by the lease, the sealer takes its own lock per transaction,
/// validation claims tokens with SKIP LOCKED, pruning deletes what is past
/// its age either way); the election is what keeps
/// them from running N times over.
///
/// On graceful shutdown the duties stop and the connection closes, which
/// releases the lock for another worker's next try.
public struct MaintenanceLeader: Service {
    public struct Configuration: Sendable {
        /// How often a follower tries the lock (and a leader that lost it
        /// tries again): half a lease, within 0.5 s...30 s, so another worker
        /// takes over within a lease of the leader's death.
        public var retryInterval: Duration
        /// How often the leader checks its connection: a fifth of the retry
        /// interval, at most 5 s; with the check's own deadline, well inside
        /// the server's keepalive detection.
        public var checkInterval: Duration

        public init(leaseSeconds: Double) {
            let retry = min(max(leaseSeconds / 2, 0.5), 30)
            retryInterval = .seconds(retry)
            checkInterval = .seconds(min(max(retry / 5, 0.1), 5))
        }
    }

    let lock: MaintenanceLock
    let configuration: Configuration
    let duties: [any Service]
    let metrics: MaintenanceMetrics
    let worker: String
    let logger: Logger
    /// Set while this worker leads (the app transfer's jobs are claimed only then).
    let leadership: MaintenanceLeadership

    public init(lock: MaintenanceLock, configuration: Configuration, duties: [any Service], metrics: MaintenanceMetrics,
                worker: String, logger: Logger, leadership: MaintenanceLeadership = MaintenanceLeadership()) {
        self.leadership = leadership
        self.lock = lock
        self.configuration = configuration
        self.duties = duties
        self.metrics = metrics
        self.worker = worker
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown { await loop() }
    }

    private func loop() async {
        var failures = 0
        var followingSaid = false
        while !Task.isCancelled {
            do {
                let connection = try await lock.connect()
                if failures > 0 { logger.notice("The maintenance lock's database answers again") }
                failures = 0
                let outcome: Result<Bool, any Error>
                do {
                    outcome = .success(try await follow(on: connection, followingSaid: &followingSaid))
                } catch {
                    outcome = .failure(error)
                }
                // Closed and awaited (the session ends, and with it the lock).
                await MaintenanceLock.close(connection)
                if try outcome.get() { return }
            } catch {
                if Task.isCancelled { return }
                failures += 1
                // At error: no maintenance runs on this worker while it
                // lasts (the first time, then every 60th).
                if failures == 1 || failures % 60 == 0 {
                    logger.error("Cannot reach the database for the maintenance lock; retrying",
                                 metadata: ["error": "\(safeDescription(error))", "failures": "\(failures)"])
                }
            }
            try? await Task.sleep(for: configuration.retryInterval)
        }
    }

    /// Follows until the lock is ours, then leads until it may be lost.
    /// Returns true when shutting down.
    private func follow(on connection: PostgresConnection, followingSaid: inout Bool) async throws -> Bool {
        while try await MaintenanceLock.tryLock(on: connection, logger: logger) == false {
            if !followingSaid {
                followingSaid = true
                logger.info("Another worker leads maintenance; this one claims and runs jobs", metadata: ["worker": "\(worker)"])
            }
            try await Task.sleep(for: configuration.retryInterval)
        }
        followingSaid = false
        let reason = await lead(on: connection)
        if Task.isCancelled {
            logger.info("Maintenance stopped: shutting down; another worker takes over")
            return true
        }
        logger.warning("Maintenance stopped here: \(reason); trying for the lock again", metadata: ["worker": "\(worker)"])
        return false
    }

    /// Runs the duties until the lock may be lost or the task is cancelled;
    /// returns why it stopped. The duties have stopped when it returns.
    private func lead(on connection: PostgresConnection) async -> String {
        logger.notice("This worker leads maintenance: the rescuer, the cleaner, the audit sealer, token validation, the pruning of refused deliveries and the app transfer's jobs run here",
                      metadata: ["worker": "\(worker)"])
        metrics.leading(true)
        leadership.set(true)
        defer {
            leadership.set(false)
            metrics.leading(false)
        }
        return await withTaskGroup(of: String?.self) { group in
            group.addTask { await watch(connection) }
            for duty in duties {
                group.addTask {
                    do { try await duty.run() } catch {
                        logger.error("A maintenance duty stopped", metadata: ["error": "\(safeDescription(error))"])
                    }
                    return nil
                }
            }
            // The watcher's answer: a duty that ends early does not end the lead.
            var reason = "stopping"
            while let next = await group.next() {
                if let next {
                    reason = next
                    break
                }
            }
            group.cancelAll()
            return reason
        }
    }

    /// Returns when the lock may be lost: the connection closed, or a check
    /// failed or went unanswered in time; or when the task is cancelled.
    private func watch(_ connection: PostgresConnection) async -> String {
        let lost = OneShot<String>()
        connection.closeFuture.whenComplete { _ in lost.complete(.success("the lock's connection closed")) }
        let interval = configuration.checkInterval
        let checker = Task { [logger] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                if Task.isCancelled { return }
                do {
                    try await MaintenanceLock.check(connection, logger: logger)
                } catch {
                    lost.complete(.success("the lock's connection did not answer (\(safeDescription(error)))"))
                    return
                }
            }
        }
        defer { checker.cancel() }
        return (try? await lost.wait()) ?? "stopping"
    }
}
