import AccountStore
import AppleSignIn
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import PostgresNIO
import Prometheus
import ServiceLifecycle

/// A process's metrics listener: `/metrics` (Prometheus text), `/healthz`
/// and `/readyz`, and nothing else. `siwa serve` binds it at
/// SIWA_METRICS_HTTP_HOST/PORT, apart from the public listener that the
/// reverse proxy exposes to the internet; `siwa worker` at
/// SIWA_WORKER_METRICS_HOST/PORT.
public enum MetricsListener {
    /// The services to run first in the process's ServiceGroup (so that they
    /// stop last, and a drain can still be scraped): a small Postgres pool
    /// of its own, so that a scrape or a readiness check never waits behind
    /// the process's work for a connection, then the HTTP server.
    /// - Parameter keys: serve's Apple key set (`/readyz` reports it, `/metrics` its age); nil in the worker.
    /// - Parameter keysRefreshInterval: how often serve refreshes `keys`, beside their age.
    /// - Parameter queueGauges: the queue gauges this process exports (each
    ///   series from one process only).
    /// - Parameter schema: serve's schema check, which `/readyz` waits for.
    static func services(
        serverName: String, host: String, port: Int, database: DatabaseConfiguration, keys: AppleKeySet?,
        keysRefreshInterval: Duration? = nil, schema: SchemaGate? = nil, queueGauges: Set<HealthRoutes.QueueGauge>, jobMaxRunSeconds: Double, registry: PrometheusCollectorRegistry,
        logger: Logger, onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> [any Service] {
        var configuration = database
        configuration.maximumConnections = 2
        configuration.sessionLimits = .runtime
        let client = PostgresClient(configuration: configuration.postgresClientConfiguration,
                                    backgroundLogger: Logger(label: "siwa.postgres"))
        let app = Application(
            router: router(HealthRoutes(keys: keys, queries: AccountQueries(client: client, jobMaxRunSeconds: jobMaxRunSeconds),
                                        registry: registry, queueGauges: queueGauges, logger: logger,
                                        keysRefreshInterval: keysRefreshInterval, schema: schema)),
            server: .http1(configuration: .init(idleTimeout: .seconds(60))),
            configuration: .init(address: .hostname(host, port: port), serverName: serverName),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? port) },
            logger: logger
        )
        return [client, app]
    }

    /// `siwa worker`'s (SIWA_WORKER_METRICS_HOST and SIWA_WORKER_METRICS_PORT):
    /// its job counters and step histograms, and the age of the oldest running job.
    /// Throws `DatabaseConfigurationError` for a bad SIWA_DATABASE_URL.
    public static func workerServices(
        host: String, port: Int, databaseURL: String, jobMaxRunSeconds: Double,
        registry: PrometheusCollectorRegistry, logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws -> [any Service] {
        Self.services(serverName: "siwa-worker", host: host, port: port, database: try DatabaseConfiguration(url: databaseURL),
                      keys: nil, queueGauges: [.oldestRunning], jobMaxRunSeconds: jobMaxRunSeconds, registry: registry,
                      logger: logger, onServerRunning: onServerRunning)
    }

    /// The listener's routes: health and metrics, nothing else.
    static func router(_ routes: HealthRoutes) -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: RequestIDMiddleware())
        routes.register(on: router)
        routes.registerMetrics(on: router)
        router.answeringMethodNotAllowed()  // last: it wraps only the "no route" answer
        return router
    }

    /// `siwa serve`'s metrics listener's router and the worker's, for a
    /// test that lists the routes each listener serves.
    public static func routers(keys: AppleKeySet, queries: AccountQueries, registry: PrometheusCollectorRegistry,
                               logger: Logger) -> (serve: Router<BasicRequestContext>, worker: Router<BasicRequestContext>) {
        (router(HealthRoutes(keys: keys, queries: queries, registry: registry, queueGauges: [.backlog], logger: logger)),
         router(HealthRoutes(keys: nil, queries: queries, registry: registry, queueGauges: [.oldestRunning], logger: logger)))
    }
}
