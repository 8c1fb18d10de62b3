import AccountStore
import Hummingbird
import HummingbirdCore
import Logging
import Metrics
import NIOCore
import PostgresNIO

/// What the admin listener needs; built by `ServerAssembly` (or a test).
public struct AdminDependencies: Sendable {
    public var apiKeys: APIKeyVerifier
    public var jobs: JobAdministration
    public var reports: AuditReports
    public var receipts: DeletionReceipts
    public var chain: AuditChainVerifier
    public var users: UserAdministration
    public var metrics: any MetricsFactory

    /// The database parts on one client (the runtime role's).
    public init(client: PostgresClient, metrics: any MetricsFactory, logger: Logger) {
        apiKeys = APIKeyVerifier(client: client, logger: logger)
        jobs = JobAdministration(client: client, logger: logger)
        reports = AuditReports(client: client, logger: logger)
        receipts = DeletionReceipts(client: client, logger: logger)
        chain = AuditChainVerifier(client: client, logger: logger)
        users = UserAdministration(client: client, logger: logger)
        self.metrics = metrics
    }
}

/// The admin listener's routes: `/admin` and below, each behind
/// `AdminAuthMiddleware` (admin keys only); `/` sends a browser to `/admin`.
public func buildAdminRouter(_ dependencies: AdminDependencies, settings: AdminListenerSettings,
                             logger: Logger) -> Router<AdminRequestContext> {
    let router = Router(context: AdminRequestContext.self)
    router.add(middleware: RequestIDMiddleware())
    router.get("/") { _, _ in AdminResponse.seeOther("/admin") }
    let limiter = AuthFailureLimiter(limit: settings.authFailuresPerMinute,
                                     addressLimit: AuthFailureLimiter.addressLimit(forKeyPrefixLimit: settings.authFailuresPerMinute))
    let admin = router.group("admin")
        .add(middleware: AdminAuthMiddleware(verifier: dependencies.apiKeys, limiter: limiter, metrics: dependencies.metrics))
    let csrf = CSRFTokens()
    let chain = ChainStatus(verifier: dependencies.chain, logger: logger)
    let page = AdminPage(reports: dependencies.reports, chain: chain, jobs: dependencies.jobs, csrf: csrf, logger: logger)
    page.register(on: admin)
    AdminUserLookup(users: dependencies.users, page: page, csrf: csrf, logger: logger).register(on: admin)
    AdminReportRoutes(reports: dependencies.reports, receipts: dependencies.receipts, chain: chain, logger: logger).register(on: admin)
    AdminJobRoutes(jobs: dependencies.jobs, csrf: csrf, logger: logger).register(on: admin)
    router.answeringMethodNotAllowed()  // last: it wraps only the "no route" answer
    return router
}

/// The admin listener: an HTTP server of its own (its own address and
/// port, SIWA_ADMIN_HTTP_HOST and SIWA_ADMIN_HTTP_PORT), run as one more
/// service of `siwa serve`'s ServiceGroup. The public listener, which Apple
/// reaches, has no `/admin` route at all.
public func buildAdminApplication(
    settings: AdminListenerSettings, dependencies: AdminDependencies, logger: Logger,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) -> Application<RouterResponder<AdminRequestContext>> {
    Application(
        router: buildAdminRouter(dependencies, settings: settings, logger: logger),
        server: .http1(configuration: .init(idleTimeout: TimeAmount(settings.idleTimeout))),
        configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "siwa-admin"),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? settings.port) },
        logger: logger
    )
}
