import AccountLifecycle
import AccountStore
import AppleSignIn
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import Metrics
import NIOCore
import Prometheus
import ServiceLifecycle

/// What the HTTP layer needs; built by `siwa serve` (or a test).
public struct ServerDependencies: Sendable {
    public var receiver: NotificationReceiver
    public var keys: AppleKeySet
    public var queries: AccountQueries
    public var registry: PrometheusCollectorRegistry
    public var metrics: any MetricsFactory
    public var maxBodyBytes: Int
    /// How long a refusal is held during a flood of junk (0: never).
    public var floodDelay: Duration
    /// The deletion receipts' public keys (nil: their route answers 404).
    public var receiptKeys: ES256KeySet?

    public init(receiver: NotificationReceiver, keys: AppleKeySet, queries: AccountQueries,
                registry: PrometheusCollectorRegistry, metrics: any MetricsFactory, maxBodyBytes: Int,
                floodDelay: Duration = .seconds(1)) {
        self.receiver = receiver
        self.keys = keys
        self.queries = queries
        self.registry = registry
        self.metrics = metrics
        self.maxBodyBytes = maxBodyBytes
        self.floodDelay = floodDelay
    }
}

/// The public listener's routes, the only ones the reverse proxy may
/// expose: Apple's notifications, health, the receipts' key set. `/v1` is
/// on the API listener (`buildAPIRouter`), `/metrics` on the metrics
/// listener (`MetricsListener`), `/admin` on the admin listener.
public func buildRouter(_ dependencies: ServerDependencies, logger: Logger) -> Router<BasicRequestContext> {
    let router = Router(context: BasicRequestContext.self)
    // First: it wraps every route added after it, and the router's 404.
    router.add(middleware: RequestIDMiddleware())
    NotificationRoutes(receiver: dependencies.receiver, maxBodyBytes: dependencies.maxBodyBytes,
                       metrics: dependencies.metrics, tarpit: FloodTarpit(delay: dependencies.floodDelay)).register(on: router)
    HealthRoutes(keys: dependencies.keys, queries: dependencies.queries, registry: dependencies.registry,
                 queueGauges: [], logger: logger).register(on: router)
    ReceiptKeysRoute(keys: dependencies.receiptKeys).register(on: router)
    router.answeringMethodNotAllowed()  // last: it wraps only the "no route" answer
    return router
}

/// The HTTP application. `services` run before the server starts and stop
/// after it has drained (ServiceGroup stops in reverse order), so pass the
/// Postgres client first, then the inbox writer.
///
/// HTTP/1.1 with an idle timeout (a connection with no request, or whose
/// request's head or body stopped arriving, is closed after the listener's `idleTimeout`),
/// and `CloseAfterResponseHandler`: an answer carrying `Connection: close`
/// (a 413, or any 4xx given before its request's body has all arrived, which
/// the handler marks so) closes the connection once it is written, instead
/// of reading the rest of the body.
public func buildApplication(
    listener: HTTPListenerSettings, dependencies: ServerDependencies, services: [any Service], logger: Logger,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) -> Application<RouterResponder<BasicRequestContext>> {
    Application(
        router: buildRouter(dependencies, logger: logger),
        server: .http1(configuration: .init(
            additionalChannelHandlers: [CloseAfterResponseHandler()],
            idleTimeout: TimeAmount(listener.idleTimeout)
        )),
        configuration: .init(address: .hostname(listener.host, port: listener.port), serverName: "siwa"),
        services: services,
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? listener.port) },
        logger: logger
    )
}
