import Metrics

/// The maintenance duties that run on one worker at a time (`MaintenanceLeader`).
public enum MaintenanceTask: String, Sendable, CaseIterable {
    case jobRescuer = "job_rescuer"
    case jobCleaner = "job_cleaner"
    case auditSealer = "audit_sealer"
    case auditVerifier = "audit_verifier"
    case tokenValidation = "token_validation"
    case rejectionPruner = "rejection_pruner"
}

/// `siwa worker`'s maintenance series (its /metrics):
///
/// - `siwa_maintenance_leader`: 1 while this worker leads maintenance, else 0
///   (summed over the workers, 1; the alert SiwaNoMaintenanceLeader);
/// - `siwa_maintenance_failures_total{task}`: passes that failed, by duty
///   (each also logged at error; the alert SiwaMaintenanceFailing).
///
/// Every series exists from the start, at 0, so a rate() has one to begin with.
public final class MaintenanceMetrics: Sendable {
    private let leader: Gauge
    private let failures: [MaintenanceTask: Counter]

    public init(factory: any MetricsFactory) {
        leader = Gauge(label: "siwa_maintenance_leader", factory: factory)
        leader.record(0)
        failures = Dictionary(uniqueKeysWithValues: MaintenanceTask.allCases.map { task in
            (task, Counter(label: "siwa_maintenance_failures_total", dimensions: [("task", task.rawValue)], factory: factory))
        })
    }

    /// Records nothing (`siwa tokens validate`, tests of parts).
    public static let disabled = MaintenanceMetrics(factory: NOOPMetricsHandler.instance)

    public func leading(_ isLeader: Bool) { leader.record(isLeader ? 1 : 0) }

    public func failed(_ task: MaintenanceTask) { failures[task]?.increment() }
}
