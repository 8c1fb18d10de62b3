import AccountLifecycle
import AccountStore
import AppleSignIn
import Foundation
import Hummingbird
import Logging
import Prometheus

/// `/healthz` (the process answers), `/readyz` (database reachable and, in
/// `siwa serve`, Apple's keys loaded), `/metrics` (Prometheus text). Health
/// is served on `siwa serve`'s public listener and on each process's metrics
/// listener (`MetricsListener`); `/metrics` only on the latter.
struct HealthRoutes: Sendable {
    /// The purge queue's gauges, read at scrape time; each process exports
    /// its own, so that no series comes from both.
    enum QueueGauge: Sendable {
        /// `siwa_jobs{kind,state}`, `siwa_jobs_oldest_runnable_seconds`, `siwa_jobs_running_overdue`,
        /// `siwa_purges_oldest_pending_seconds` and `siwa_purge_sla_seconds` (serve).
        case backlog
        /// `siwa_jobs_oldest_running_seconds` (the worker).
        case oldestRunning
    }

    /// nil in the worker, which loads no Apple keys.
    let keys: AppleKeySet?
    let queries: AccountQueries
    let registry: PrometheusCollectorRegistry
    let queueGauges: Set<QueueGauge>
    let logger: Logger
    /// SIWA_APPLE_JWKS_REFRESH_SECONDS (serve), beside the keys' age.
    var keysRefreshInterval: Duration? = nil
    /// serve's schema check: open once the schema is current. Until then the
    /// metrics listener (bound at once) answers `/healthz` 200 and `/readyz`
    /// 503 `waiting_for_migrate`, so an orchestrator waits for `siwa
    /// migrate` instead of restarting the process or routing traffic to it.
    var schema: SchemaGate? = nil
    /// The age of keys never loaded counts from here.
    let started = ContinuousClock.now

    /// `/healthz` and `/readyz`.
    func register<Context: RequestContext>(on router: Router<Context>) {
        router.get("/healthz") { _, _ in JSONResponse.make(.ok, ["status": "ok"]) }
        router.get("/readyz") { _, _ in await readiness() }
    }

    /// `/metrics`: never on the public listener.
    func registerMetrics<Context: RequestContext>(on router: Router<Context>) {
        router.get("/metrics") { _, _ in
            await refreshQueueGauges()
            refreshKeyGauges()
            ProcessGauges.update(registry)
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
    }

    /// The purge queue, read at scrape time (one small query; skipped if the
    /// database does not answer within a second, so /metrics never hangs,
    /// and `siwa_database_reachable` is then 0). Alert on
    /// `siwa_jobs{kind="purge_user",state="discarded"} > 0`, on a growing oldest age, and on
    /// overdue running jobs (a worker stuck or gone): deploy/prometheus/alerts.yml.

    func refreshQueueGauges() async {
        let snapshot = await withDeadline(.seconds(1), { try await queries.queueSnapshot(logger: logger) })
        registry.makeGauge(descriptor: MetricNameDescriptor(
            namespace: "siwa", metricName: "database_reachable", unitName: "",
            helpText: "1 if the database answered this scrape's query within a second, else 0"))
            .set(snapshot == nil ? 0.0 : 1.0)
        guard let snapshot else { return }
        if queueGauges.contains(.backlog) {
            let jobs = MetricNameDescriptor(namespace: "siwa", metricName: "jobs", unitName: "",
                                            helpText: "Jobs in siwa.jobs by kind (\(JobKinds.listed)) and state")
            // The kinds siwa makes are always there (0 before the first job),
            // so an alert on one kind's discarded jobs has a series to read.
            for kind in Set(JobKinds.names).union(snapshot.jobs.keys).sorted() {
                for state in JobState.allCases {
                    registry.makeGauge(descriptor: jobs, labels: [("kind", kind), ("state", state.rawValue)])
                        .set(Double(snapshot.jobs[kind]?[state.rawValue] ?? 0))
                }
            }
            registry.makeGauge(descriptor: MetricNameDescriptor(namespace: "siwa", metricName: "jobs_oldest_runnable", unitName: "seconds",
                                                                helpText: "How long the oldest runnable purge job has waited (0: none)"))
                .set(snapshot.oldestRunnableSeconds)
            registry.makeGauge(descriptor: MetricNameDescriptor(
                namespace: "siwa", metricName: "jobs_running_overdue", unitName: "",
                helpText: "Running purge jobs attempted longer ago than SIWA_JOB_MAX_RUN_SECONDS, or whose lease expired"))
                .set(Double(snapshot.runningOverdue))
            registry.makeGauge(descriptor: MetricNameDescriptor(
                namespace: "siwa", metricName: "purges_oldest_pending", unitName: "seconds",
                helpText: "How long ago the oldest unfinished purge (available, retryable or running) was requested (0: none)"))
                .set(snapshot.oldestPendingPurgeSeconds)
            if let sla = snapshot.purgeSLASeconds {
                registry.makeGauge(descriptor: MetricNameDescriptor(
                    namespace: "siwa", metricName: "purge_sla", unitName: "seconds",
                    helpText: "SIWA_PURGE_SLA_HOURS as siwa migrate recorded it (siwa.report_settings), in seconds"))
                    .set(sla)
            }
            registry.makeGauge(descriptor: MetricNameDescriptor(
                namespace: "siwa", metricName: "audit_chain_sealed_seq", unitName: "",
                helpText: "The seq of the audit chain's last sealed row (0: none sealed yet)"))
                .set(Double(snapshot.sealedHeadSeq))
            registry.makeGauge(descriptor: MetricNameDescriptor(
                namespace: "siwa", metricName: "audit_unsealed_oldest", unitName: "seconds",
                helpText: "How long ago the oldest audit row not sealed yet was written (0: all sealed)"))
                .set(snapshot.oldestUnsealedSeconds)
        }
        if queueGauges.contains(.oldestRunning) {
            registry.makeGauge(descriptor: MetricNameDescriptor(
                namespace: "siwa", metricName: "jobs_oldest_running", unitName: "seconds",
                helpText: "How long ago the oldest running job's current attempt began, in any worker (0: none running)"))
                .set(snapshot.oldestRunningSeconds)
        }
    }

    /// `siwa_apple_keys_age_seconds`: how long ago Apple's key set was last
    /// loaded (since start while it never was), beside the refresh
    /// interval: a refresh that keeps failing (Apple unreachable, a broken
    /// answer) lets the age pass it (SiwaAppleKeysStale).
    func refreshKeyGauges() {
        guard let keys else { return }
        let age = keys.age ?? (ContinuousClock.now - started)
        registry.makeGauge(descriptor: MetricNameDescriptor(
            namespace: "siwa", metricName: "apple_keys_age", unitName: "seconds",
            helpText: "How long ago Apple's key set was last loaded (since start if never)"))
            .set(age / .seconds(1))
        if let keysRefreshInterval {
            registry.makeGauge(descriptor: MetricNameDescriptor(
                namespace: "siwa", metricName: "apple_keys_refresh_interval", unitName: "seconds",
                helpText: "SIWA_APPLE_JWKS_REFRESH_SECONDS: how often Apple's key set is fetched"))
                .set(Double(keysRefreshInterval.components.seconds))
        }
    }

    func readiness() async -> Response {
        let database = await withDeadline(.seconds(2)) { try await queries.ping(logger: logger) } != nil
        guard let keys else {
            return JSONResponse.make(database ? .ok : .serviceUnavailable, [
                "status": database ? "ready" : "not_ready",
                "database": database ? "ok" : "unreachable",
            ])
        }
        let keysLoaded = keys.isLoaded
        let schemaCurrent = schema?.isOpen ?? true
        let ready = database && keysLoaded && schemaCurrent
        let (status, reachable, loaded) = (ready ? "ready" : "not_ready", database ? "ok" : "unreachable",
                                           keysLoaded ? "loaded" : "not_loaded")
        if !schemaCurrent {
            return JSONResponse.make(.serviceUnavailable, [
                "status": status, "database": reachable, "apple_keys": loaded, "schema": "waiting_for_migrate",
            ])
        }
        return JSONResponse.make(ready ? .ok : .serviceUnavailable, ["status": status, "database": reachable, "apple_keys": loaded])
    }
}
