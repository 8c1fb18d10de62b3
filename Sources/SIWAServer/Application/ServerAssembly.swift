import AccountLifecycle
import AccountStore
import AppleSignIn
import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import Metrics
import PostgresNIO
import Prometheus
import SIWAConfiguration
import ServiceLifecycle

/// Wires `siwa serve` from its settings: Postgres client, Apple key set,
/// verifier, group-commit inbox, HTTP routes. The executable and the tests
/// build the server the same way.
public enum ServerAssembly {
    public static func makeApplication(
        settings: ServerSettings,
        registry: PrometheusCollectorRegistry = SIWAMetrics.makeRegistry(),
        migrations: Migrator? = nil,
        migrationWait: MigrationWait = MigrationWait(),
        logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in },
        onAdminRunning: @escaping @Sendable (Int) async -> Void = { _ in },
        onAPIRunning: @escaping @Sendable (Int) async -> Void = { _ in },
        onMetricsRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws -> Application<RouterResponder<BasicRequestContext>> {
        // Everything that can refuse a setting first: past this point
        // HTTP clients exist, and each must be shut down, not dropped.
        let metrics = SIWAMetrics.factory(for: registry)
        let appleCalls = AppleCallTelemetry(metrics: metrics)
        let appleAccess = try settings.signIn.map { try AppleAccess($0, observer: appleCalls) }
        var configuration = try settings.database.configuration()
        // No wait on a stuck session's lock lasts: see SessionLimits.runtime.
        configuration.sessionLimits = .runtime
        let database = configuration
        let client = PostgresClient(configuration: database.postgresClientConfiguration,
                                    backgroundLogger: Logger(label: "siwa.postgres"))
        // Keys are fetched with a client of their own that follows no
        // redirect (HTTPClient.shared follows up to 20); the service below
        // shuts it down after the key refresh has stopped.
        let keysClient = HTTPJWKSSource.makeHTTPClient()
        let keys = AppleKeySet(
            source: HTTPJWKSSource(url: settings.appleKeys.jwksURL, httpClient: keysClient, observer: appleCalls),
            refetchCooldown: settings.appleKeys.refetchCooldown,
            logger: Logger(label: "siwa.apple-keys")
        )
        let verifier = NotificationVerifier(keys: keys, policy: VerificationPolicy(audiences: settings.clients.audiences))
        let inbox = InboxWriter(client: client, options: settings.inbox, logger: Logger(label: "siwa.inbox"))
        // Refusals have a small pool of their own: a flood of junk must not
        // take the connections genuine notifications need.
        var rejectionDatabase = database
        rejectionDatabase.maximumConnections = 2
        let rejectionClient = PostgresClient(configuration: rejectionDatabase.postgresClientConfiguration,
                                             backgroundLogger: Logger(label: "siwa.postgres"))
        let unrecorded = Counter(label: "siwa_rejections_unrecorded_total", factory: metrics)
        let rejections = RejectionWriter(client: rejectionClient, options: settings.rejections, logger: Logger(label: "siwa.rejections"),
                                         countUnrecorded: { unrecorded.increment(by: $0) })
        let receiver = NotificationReceiver(
            verifier: verifier, router: settings.events, clients: settings.clients, inbox: inbox,
            rejections: rejections, metrics: metrics, logger: Logger(label: "siwa.notifications")
        )
        var dependencies = ServerDependencies(
            receiver: receiver, keys: keys, queries: AccountQueries(client: client, jobMaxRunSeconds: settings.jobMaxRunSeconds),
            registry: registry, metrics: metrics, maxBodyBytes: settings.notificationRoute.maxBodyBytes,
            floodDelay: settings.notificationRoute.floodDelay
        )
        dependencies.receiptKeys = settings.receiptKeys
        // The admin and API listeners bind once the schema check passed.
        let schemaGate = SchemaGate()
        var signInServices: [any Service] = []
        // The API listener (`/v1`), last in the list below: it stops first,
        // so its in-flight sign-ins drain before the writer and the clients
        // they use stop.
        var apiServices: [any Service] = []
        if let access = appleAccess {
            let store = SignInStore(client: client, validationPeriodHours: settings.tokenValidation.periodHours ?? 24,
                                    logger: Logger(label: "siwa.sign-in"))
            let directory = UserDirectory(client: client, logger: Logger(label: "siwa.users"))
            let service = SignInService(
                verifier: IdentityTokenVerifier(keys: keys, policy: VerificationPolicy(audiences: settings.clients.audiences,
                                                                                       now: settings.identityTokenClock)),
                apple: access.apple, keyRing: access.keyRing, store: store, directory: directory,
                requires: settings.signInRequires, clients: settings.clients, logger: Logger(label: "siwa.sign-in"), metrics: metrics)
            let keyLogger = Logger(label: "siwa.api-keys")
            let keyCache = APIKeyCache(heartbeat: settings.apiKeyCacheHeartbeat)
            signInServices = [WriterService(writer: store), APIKeyChangeListener(client: client, cache: keyCache, logger: keyLogger)]
            if let api = settings.api {
                let feed = AppEventFeed(client: client, retentionDays: api.eventsFeedRetentionDays, logger: Logger(label: "siwa.events-feed"))
                let signIn = SignInDependencies(service: service, directory: directory,
                                                apiKeys: APIKeyVerifier(client: client, cache: keyCache, logger: keyLogger), feed: feed)
                var apiApplication = buildAPIApplication(settings: api, signIn: signIn, maxBodyBytes: settings.notificationRoute.maxBodyBytes,
                                                         metrics: metrics, logger: logger) { port in
                    logger.info("API listener (/v1)", metadata: ["address": "\(api.host):\(port)"])
                    await onAPIRunning(port)
                }
                apiApplication.beforeServerStarts { try await schemaGate.wait() }
                apiServices = [apiApplication]
            }
        }
        // The admin listener has a pool of its own, as the rejections do: an
        // admin's long read (the chain's verification walks the whole log)
        // must not take the connections notifications need.
        var adminServices: [any Service] = []
        if let admin = settings.admin {
            var adminDatabase = database
            adminDatabase.maximumConnections = 2
            let adminClient = PostgresClient(configuration: adminDatabase.postgresClientConfiguration,
                                             backgroundLogger: Logger(label: "siwa.postgres"))
            let adminLogger = Logger(label: "siwa.admin")
            let dependencies = AdminDependencies(client: adminClient, metrics: metrics, logger: adminLogger)
            var adminApplication = buildAdminApplication(settings: admin, dependencies: dependencies, logger: adminLogger) { port in
                adminLogger.info("Admin listener", metadata: ["address": "\(admin.host):\(port)"])
                await onAdminRunning(port)
            }
            adminApplication.beforeServerStarts { try await schemaGate.wait() }
            adminServices = [adminClient, adminApplication]
        }
        // The metrics listener first: it stops last, so a draining serve can still be scraped.
        var metricsServices: [any Service] = []
        if let listener = settings.metrics {
            let metricsLogger = Logger(label: "siwa.metrics")
            metricsServices = MetricsListener.services(
                serverName: "siwa", host: listener.host, port: listener.port, database: database, keys: keys,
                keysRefreshInterval: settings.appleKeys.refreshInterval, schema: schemaGate, queueGauges: [.backlog], jobMaxRunSeconds: settings.jobMaxRunSeconds, registry: registry, logger: metricsLogger
            ) { port in
                metricsLogger.info("Metrics listener: /metrics, /healthz, /readyz", metadata: ["address": "\(listener.host):\(port)"])
                await onMetricsRunning(port)
            }
        }
        var app = buildApplication(
            listener: settings.http, dependencies: dependencies,
            services: metricsServices + [
                client,
                rejectionClient,
                HTTPClientService(client: keysClient),
            ] + (appleAccess.map { [HTTPClientService(client: $0.httpClient)] as [any Service] } ?? []) + [
                WriterService(writer: inbox),
                WriterService(writer: rejections),
                KeyRefreshService(keys: keys, interval: settings.appleKeys.refreshInterval),
            ] + signInServices + adminServices + apiServices,
            logger: logger,
            onServerRunning: onServerRunning
        )
        let migrator = migrations
        let access = appleAccess
        app.beforeServerStarts {
            logger.info("Database", metadata: ["database": "\(database.redactedDescription)", "tls": "\(database.tlsDescription)"])
            // Wait for a schema that is behind (an upgrade's migration not
            // yet applied); refuse one that is ahead or was edited.
            if let migrator {
                try await migrator.waitUntilUpToDate(client: client, logger: logger, wait: migrationWait) { pause in
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
                }
            }
            schemaGate.open()
            try await RuntimeRole.warnIfPrivileged(as: .serve, client: client, logger: logger)
            if settings.admin == nil { logger.info("The admin listener is off (SIWA_ADMIN_HTTP_PORT=off)") }
            if settings.metrics == nil { logger.info("The metrics listener is off (SIWA_METRICS_HTTP_PORT=off): no /metrics from this process") }
            if let appleAccess = access {
                for warning in appleAccess.warnings { logger.warning("\(warning)") }
                if let api = settings.api {
                    logger.info("Sign-in is on: /v1/sign-in, /v1/users/{sub} on the API listener",
                                metadata: ["apple": "\(appleAccess.apple.baseURL)", "address": "\(api.host):\(api.port)"])
                } else {
                    logger.warning("Sign-in is on, but the API listener is off (SIWA_API_HTTP_PORT=off): this process serves no /v1")
                }
            } else {
                logger.info("Sign-in is off (no /v1 routes): set SIWA_APPLE_TEAM_ID, SIWA_APPLE_KEY_ID, SIWA_APPLE_PRIVATE_KEY_FILE and SIWA_TOKEN_ENCRYPTION_KEYS_FILE to turn it on")
            }
            if let keys = settings.receiptKeys {
                logger.info("Deletion receipt keys published at \(ReceiptKeysRoute.path)",
                            metadata: ["kids": "\(keys.entries.map(\.keyID).joined(separator: ","))"])
            }
        }
        return app
    }
}
