import Logging
import OTel
import ServiceLifecycle
import Tracing

/// Spans (the notification path, each job step) leave the process only when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` is set: then swift-otel's OTLP/HTTP exporter
/// is bootstrapped as the process's tracer, and its service (a batch
/// processor that flushes on shutdown) joins the ServiceGroup. Otherwise no
/// tracer is bootstrapped, and every `withSpan` is swift-distributed-tracing's
/// no-op.
enum TracingSetup {
    /// The span's `trace_id` and `span_id` on every log line logged in one,
    /// when tracing is on (for `LoggingSetup.bootstrap`, which comes first).
    static func logMetadata(environment: [String: String]) -> Logger.MetadataProvider? {
        guard let endpoint = environment["OTEL_EXPORTER_OTLP_ENDPOINT"], !endpoint.isEmpty else { return nil }
        return OTel.makeLoggingMetadataProvider()
    }

    /// Once per process, before any span. Nil when tracing is off.
    /// - Parameter serviceName: `service.name` unless OTEL_SERVICE_NAME says otherwise.
    static func bootstrap(serviceName: String, environment: [String: String]) -> (any Service)? {
        guard let endpoint = environment["OTEL_EXPORTER_OTLP_ENDPOINT"], !endpoint.isEmpty else { return nil }
        let logger = Logger(label: "siwa.tracing")
        var configuration = OTel.Configuration.default
        configuration.serviceName = serviceName
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = .warning
        do {
            // The other OTEL_* variables (OTEL_SERVICE_NAME, headers, timeout,
            // sampler) apply over these.
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            InstrumentationSystem.bootstrap(backend.factory)
            logger.info("Tracing on: spans are exported with OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT")
            return backend.service
        } catch {
            Startup.fail("OTEL_EXPORTER_OTLP_ENDPOINT: cannot export spans: \(error)")
        }
    }
}
