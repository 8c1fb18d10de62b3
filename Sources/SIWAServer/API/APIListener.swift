import AccountLifecycle
import AccountStore
import Hummingbird
import HummingbirdCore
import Logging
import Metrics
import NIOCore

/// What the `/v1` API (sign-in, users, deletion, the events feed) needs.
public struct SignInDependencies: Sendable {
    public var service: SignInService
    public var directory: UserDirectory
    public var apiKeys: APIKeyVerifier
    public var feed: AppEventFeed

    public init(service: SignInService, directory: UserDirectory, apiKeys: APIKeyVerifier, feed: AppEventFeed) {
        self.service = service
        self.directory = directory
        self.apiKeys = apiKeys
        self.feed = feed
    }
}

/// The API listener's routes: `/v1` and nothing else. Health, metrics and
/// Apple's notifications stay on the public listener, so that a scrape or a
/// proxy has one address to reach them by, whichever of siwa's listeners
/// it can see.
///
/// Each request gets its `X-Request-Id` (outermost, so the other two see
/// it), a server span (Hummingbird's TracingMiddleware: named by the route,
/// joined to the caller's `traceparent`), and its place in
/// `siwa_api_request_duration_seconds`.
public func buildAPIRouter(_ signIn: SignInDependencies, maxBodyBytes: Int, metrics: any MetricsFactory = MetricsSystem.factory,
                           logger: Logger) -> Router<BasicRequestContext> {
    let router = Router(context: BasicRequestContext.self)
    router.add(middleware: RequestIDMiddleware())
    router.add(middleware: TracingMiddleware(recordingHeaders: [RequestIDHeader.header], redactingQueryParameters: []))
    router.add(middleware: APIMetricsMiddleware(metrics: APIRequestMetrics(factory: metrics)))
    UserRoutes(signIn: signIn.service, directory: signIn.directory, apiKeys: signIn.apiKeys,
               maxBodyBytes: maxBodyBytes, logger: logger).register(on: router)
    EventFeedRoute(feed: signIn.feed, clients: signIn.service.clients, apiKeys: signIn.apiKeys, logger: logger).register(on: router)
    router.answeringMethodNotAllowed()  // last: it wraps only the "no route" answer
    return router
}

/// The API listener: an HTTP server of its own (SIWA_API_HTTP_HOST and
/// SIWA_API_HTTP_PORT), run as one more service of `siwa serve`'s
/// ServiceGroup, as the admin listener is. The app's backend reaches it over
/// loopback or the private network; the public listener, which the reverse
/// proxy exposes to the internet, has no `/v1` route at all. The same HTTP
/// hygiene as the public listener: an idle timeout, and an answer given
/// before a body was read whole closes the connection (`CloseAfterResponseHandler`).
public func buildAPIApplication(
    settings: APIListenerSettings, signIn: SignInDependencies, maxBodyBytes: Int, metrics: any MetricsFactory, logger: Logger,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) -> Application<RouterResponder<BasicRequestContext>> {
    Application(
        router: buildAPIRouter(signIn, maxBodyBytes: maxBodyBytes, metrics: metrics, logger: logger),
        server: .http1(configuration: .init(
            additionalChannelHandlers: [CloseAfterResponseHandler()],
            idleTimeout: TimeAmount(settings.idleTimeout)
        )),
        configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "siwa"),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? settings.port) },
        logger: logger
    )
}
