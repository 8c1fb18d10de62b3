import AccountStore
import AppleSignIn
import Foundation
import Hummingbird
import Logging
import Prometheus

/// `/healthz` (the process answers), `/readyz` (database reachable and
/// Apple's keys loaded), `/metrics` (Prometheus text).
struct HealthRoutes: Sendable {
    let keys: AppleKeySet
    let queries: AccountQueries
    let registry: PrometheusCollectorRegistry
    let logger: Logger

    func register(on router: Router<BasicRequestContext>) {
        router.get("/healthz") { _, _ in JSONResponse.make(.ok, ["status": "ok"]) }
        router.get("/readyz") { _, _ in await readiness() }
        router.get("/metrics") { _, _ in
            await refreshQueueGauges()
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
    }

    /// The purge queue, read at scrape time (one small query; skipped if the
    /// database does not answer within a second, so /metrics never hangs):
    /// `siwa_jobs{state}`, `siwa_jobs_oldest_runnable_seconds` and
    /// `siwa_jobs_running_overdue`. Alert on `siwa_jobs{state="discarded"} > 0`,
    /// on a growing oldest age, and on overdue running jobs (a worker stuck
    /// or gone).
    func refreshQueueGauges() async {
        guard let snapshot = await withDeadline(.seconds(1), { try await queries.queueSnapshot(logger: logger) }) else { return }
        let jobs = MetricNameDescriptor(namespace: "siwa", metricName: "jobs", unitName: "",
                                        helpText: "Purge jobs in siwa.jobs by state")
        for state in JobState.allCases {
            registry.makeGauge(descriptor: jobs, labels: [("state", state.rawValue)])
                .set(Double(snapshot.jobsByState[state.rawValue] ?? 0))
        }
        registry.makeGauge(descriptor: MetricNameDescriptor(namespace: "siwa", metricName: "jobs_oldest_runnable", unitName: "seconds",
                                                            helpText: "How long the oldest runnable purge job has waited (0: none)"))
            .set(snapshot.oldestRunnableSeconds)
        registry.makeGauge(descriptor: MetricNameDescriptor(
            namespace: "siwa", metricName: "jobs_running_overdue", unitName: "",
            helpText: "Running purge jobs attempted longer ago than SIWA_JOB_MAX_RUN_SECONDS, or whose lease expired"))
            .set(Double(snapshot.runningOverdue))
    }

    func readiness() async -> Response {
        let database = await withDeadline(.seconds(2)) { try await queries.ping(logger: logger) } != nil
        let keysLoaded = keys.isLoaded
        let ready = database && keysLoaded
        return JSONResponse.make(ready ? .ok : .serviceUnavailable, [
            "status": ready ? "ready" : "not_ready",
            "database": database ? "ok" : "unreachable",
            "apple_keys": keysLoaded ? "loaded" : "not_loaded",
        ])
    }
}
