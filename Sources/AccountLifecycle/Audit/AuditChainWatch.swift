import AccountStore
import Logging
import Metrics
import ServiceLifecycle

/// `siwa worker`'s check of the audit chain, on the worker that leads
/// maintenance: the walk `siwa audit verify` does (`AuditChainVerifier`:
/// every sealed row's hash recomputed from the row) when it takes the lead
/// and every `interval` after (SIWA_AUDIT_VERIFY_MINUTES), reported as
///
/// - `siwa_audit_chain_verified_seq`: the last row that checked out (the
///   verified head; below a break, where it stops);
/// - `siwa_audit_chain_broken`: 1 if the last walk found a break, else 0
///   (the alert SiwaAuditChainBroken), the break also logged at critical.
///
/// A walk that cannot finish (the database) is a failed maintenance pass
/// (`audit_verifier`), and is tried again at the next interval.
///
/// The walk reads at most `rowsPerSecond` rows a second: it re-reads the
/// whole log each time, and a worker takes the lead when it starts, which
/// is when a backlog of jobs is likeliest; at full speed the walk would
/// take a core from them for as long as the log is long.
public struct AuditChainWatch: Service {
    /// A million rows in under two minutes, at a small part of one core.
    public static let rowsPerSecond = 10_000

    let verifier: AuditChainVerifier
    let interval: Duration
    let verifiedHead: Gauge
    let broken: Gauge
    let failures: MaintenanceMetrics
    let logger: Logger

    public init(verifier: AuditChainVerifier, interval: Duration, metrics: any MetricsFactory,
                failures: MaintenanceMetrics = .disabled, logger: Logger) {
        self.verifier = verifier
        self.interval = interval
        verifiedHead = Gauge(label: "siwa_audit_chain_verified_seq", factory: metrics)
        broken = Gauge(label: "siwa_audit_chain_broken", factory: metrics)
        broken.record(0)
        self.failures = failures
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown { await loop() }
    }

    private func loop() async {
        while !Task.isCancelled {
            do {
                let report = try await verifier.verify(rowsPerSecond: Self.rowsPerSecond)
                verifiedHead.record(Double(report.head?.seq ?? 0))
                broken.record(report.failure == nil ? 0 : 1)
                if let failure = report.failure {
                    logger.critical("The audit chain is broken", metadata: ["seq": "\(failure.seq)", "reason": "\(failure.reason)"])
                } else {
                    logger.info("Audit chain verified", metadata: ["head": "\(report.head?.description ?? "none")",
                                                                   "unsealed": "\(report.unsealed)"])
                }
            } catch {
                if Task.isCancelled { return }
                failures.failed(.auditVerifier)
                logger.error("Maintenance pass failed: cannot verify the audit chain; trying again at the next interval",
                             metadata: ["task": "\(MaintenanceTask.auditVerifier.rawValue)", "error": "\(safeDescription(error))"])
            }
            do { try await Task.sleep(for: interval) } catch { return }
        }
    }
}
