import AccountStore
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import PostgresNIO
import Prometheus
import ServiceLifecycle

/// `siwa worker`'s own HTTP listener (SIWA_WORKER_METRICS_HOST and
/// SIWA_WORKER_METRICS_PORT): `/healthz`, `/readyz` (the worker's database
/// reachable) and `/metrics` (its job counters and step histograms, and the
/// age of the oldest running job). Nothing else is routed on it.
public enum WorkerListener {
    /// The services to run first in the worker's ServiceGroup (so that they
    /// stop last, and a drain can still be scraped): a small Postgres pool
    /// of its own, so that a scrape or a readiness check never waits behind
    /// the jobs for a connection, then the HTTP server.
    /// Throws `DatabaseConfigurationError` for a bad SIWA_DATABASE_URL.
    public static func services(
        host: String, port: Int, databaseURL: String, jobMaxRunSeconds: Double,
        registry: PrometheusCollectorRegistry, logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws -> [any Service] {
        var configuration = try DatabaseConfiguration(url: databaseURL, maximumConnections: 2)
        configuration.sessionLimits = .runtime
        let client = PostgresClient(configuration: configuration.postgresClientConfiguration,
                                    backgroundLogger: Logger(label: "siwa.postgres"))
        let router = Router(context: BasicRequestContext.self)
        router.add(middleware: RequestIDMiddleware())
        HealthRoutes(keys: nil, queries: AccountQueries(client: client, jobMaxRunSeconds: jobMaxRunSeconds), registry: registry,
                     queueGauges: [.oldestRunning], logger: logger).register(on: router)
        let app = Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: .seconds(60))),
            configuration: .init(address: .hostname(host, port: port), serverName: "siwa-worker"),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? port) },
            logger: logger
        )
        return [client, app]
    }
}
