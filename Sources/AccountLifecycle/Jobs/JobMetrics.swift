import AccountStore
import Metrics
import Synchronization
import Tracing

/// The worker's counters and histograms (`siwa worker`'s /metrics), made
/// once per label value, as NotificationMetrics does: a registry look-up
/// per job would take a lock on the hot path.
///
/// - `siwa_worker_jobs_claimed_total{kind}`, `…_completed_total`,
///   `…_retried_total`, `…_discarded_total`, `…_rescued_total` (a rescue
///   that used the last attempt counts as rescued and as discarded);
/// - `siwa_worker_step_duration_seconds{step,outcome}` (outcome `completed`
///   or `failed`; the built-in step, when it runs for a claimed batch in one
///   statement, is one observation for the batch);
/// - `siwa_worker_webhook_failures_total{step,status_class}` (`4xx`, `5xx`,
///   `3xx`: redirects are not followed, `timeout`, `unreachable`, `other`);
/// - `siwa_worker_lease_renewals_lost_total`: runs the heartbeat found no
///   longer this worker's (rescued during a database outage, or stalled).
public final class JobMetrics: Sendable {
    public static let outcomes = ["claimed", "completed", "retried", "discarded", "rescued"]

    private let factory: any MetricsFactory
    private let jobCounters = Mutex([String: Counter]())
    private let stepTimers = Mutex([String: Timer]())
    private let webhookCounters = Mutex([String: Counter]())
    private let leasesLost: Counter

    /// The series of the worker's job kinds and their steps are made when
    /// the worker starts (`expose`).
    public init(factory: any MetricsFactory) {
        self.factory = factory
        leasesLost = Counter(label: "siwa_worker_lease_renewals_lost_total", factory: factory)
    }

    /// Makes the series of `kinds` and `steps` now (0 before the first job),
    /// so a rate() has a series to begin with.
    public func expose(kinds: [String], steps: [String]) {
        for kind in kinds {
            for outcome in Self.outcomes { _ = counter(outcome, kind: kind) }
        }
        for step in steps {
            _ = timer(step: step, failed: false)
            _ = timer(step: step, failed: true)
        }
    }

    /// A metrics object that records nothing (the bench, tests of parts).
    public static let disabled = JobMetrics(factory: NOOPMetricsHandler.instance)

    public func claimed(_ jobs: [ClaimedJob]) {
        for job in jobs { counter("claimed", kind: job.kind).increment() }
    }

    public func completed(kind: String) { counter("completed", kind: kind).increment() }
    public func retried(kind: String) { counter("retried", kind: kind).increment() }
    public func discarded(kind: String) { counter("discarded", kind: kind).increment() }

    public func rescued(_ counts: [RescuedJobs]) {
        for count in counts {
            counter("rescued", kind: count.kind).increment(by: count.rescued)
            if count.discarded > 0 { counter("discarded", kind: count.kind).increment(by: count.discarded) }
        }
    }

    public func leaseLost() { leasesLost.increment() }

    /// One step of one job (`jobID`), or of a claimed batch (`batch`: its
    /// size), for every kind: a span (`siwa.job.step`, a no-op unless a
    /// tracer is bootstrapped) and its duration by step and outcome.
    public func measure<T>(step name: String, jobID: Int64?, batch: Int? = nil, _ body: () async throws -> T) async throws -> T {
        let start = ContinuousClock.now
        do {
            let value = try await withSpan("siwa.job.step", ofKind: .internal) { span in
                if let jobID { span.attributes["siwa.job.id"] = Int(jobID) }
                span.attributes["siwa.job.step"] = name
                if let batch { span.attributes["siwa.job.batch"] = batch }
                return try await body()
            }
            step(name, failed: false, seconds: ContinuousClock.now - start)
            return value
        } catch {
            step(name, failed: true, seconds: ContinuousClock.now - start)
            throw error
        }
    }

    public func step(_ name: String, failed: Bool, seconds duration: Duration) {
        timer(step: name, failed: failed).record(duration: duration)
    }

    public func webhookFailed(step: String, statusClass: String) {
        let key = "\(step) \(statusClass)"
        let counter = webhookCounters.withLock({ $0[key] }) ?? Counter(
            label: "siwa_worker_webhook_failures_total", dimensions: [("step", step), ("status_class", statusClass)], factory: factory)
        webhookCounters.withLock { $0[key] = counter }
        counter.increment()
    }

    private func counter(_ outcome: String, kind: String) -> Counter {
        let key = "\(outcome) \(kind)"
        if let counter = jobCounters.withLock({ $0[key] }) { return counter }
        // Made outside the lock (the factory takes its own); a race makes
        // the same series twice, which the registry hands back as one.
        let counter = Counter(label: "siwa_worker_jobs_\(outcome)_total", dimensions: [("kind", kind)], factory: factory)
        jobCounters.withLock { $0[key] = counter }
        return counter
    }

    private func timer(step: String, failed: Bool) -> Timer {
        let outcome = failed ? "failed" : "completed"
        let key = "\(step) \(outcome)"
        if let timer = stepTimers.withLock({ $0[key] }) { return timer }
        let timer = Timer(label: "siwa_worker_step_duration_seconds", dimensions: [("step", step), ("outcome", outcome)], factory: factory)
        stepTimers.withLock { $0[key] = timer }
        return timer
    }
}
