import Prometheus
import SIWAConfiguration

/// The Prometheus registry of a siwa process, `siwa serve`'s or `siwa
/// worker`'s, made in one place: a series both processes export whatever
/// they do (such as a `siwa_build_info{version,commit}` gauge) is added in
/// `makeRegistry`.
public enum SIWAMetrics {
    public static func makeRegistry() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        SIWAVersion.recordBuildInfo(metrics: PrometheusMetricsFactory(registry: registry))
        return registry
    }

    /// swift-metrics' factory over `registry`. Job steps can take minutes
    /// (a webhook's timeout, SQL up to SIWA_JOB_MAX_RUN_SECONDS), so their
    /// histogram goes on past the default buckets' 10 s, to 15 min.
    public static func factory(for registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets["siwa_worker_step_duration_seconds"] = [
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
            .seconds(30), .seconds(60), .seconds(120), .seconds(300), .seconds(900),
        ]
        return factory
    }
}
