import AccountLifecycle
import AccountStore
import AppleSignIn
import Foundation
import SIWAConfiguration

/// Everything `siwa serve` is configured with, as one settings value per
/// component, each read from its own settings (declared in SettingsCatalog)
/// where that component's value is defined. A new setting is a declaration
/// and a line in its component's reader; this list changes only with a new
/// component. Reading everything here, before anything is built, keeps every
/// refusal of a bad value at start-up, before a client exists.
public struct ServerSettings: Sendable {
    public var database: DatabaseSettings
    public var log: LogSettings
    /// The public listener.
    public var http: HTTPListenerSettings
    /// Apple's public keys, for notifications and identity tokens alike.
    public var appleKeys: AppleKeysSettings
    /// POST /apple/notifications: its body bound and flood tarpit.
    public var notificationRoute: NotificationRouteSettings
    /// What each Apple event does to its user.
    public var events: EventRouter
    /// The inbox writer's lanes, batches and timeout.
    public var inbox: InboxWriter.Options
    public var rejections: RejectionWriter.Options
    /// nil: sign-in is off (no `/v1` routes).
    public var signIn: SignInSettings?
    /// What POST /v1/sign-in needs beside the identity token.
    public var signInRequires: SignInRequirement
    /// The client ids notifications and identity tokens may be for, each
    /// with its team; the web clients and their Return URLs.
    public var clients: AppleClients
    /// When a stored refresh token is first due for validation.
    public var tokenValidation: TokenValidationSettings
    /// The worker's SIWA_JOB_MAX_RUN_SECONDS: `/metrics` counts running jobs
    /// older than this as overdue.
    public var jobMaxRunSeconds: Double
    /// nil: no admin listener (SIWA_ADMIN_HTTP_PORT=off).
    public var admin: AdminListenerSettings?
    /// The `/v1` listener; nil: none (SIWA_API_HTTP_PORT=off). Bound only
    /// when sign-in is on.
    public var api: APIListenerSettings?
    /// `/metrics` (and health); nil: none (SIWA_METRICS_HTTP_PORT=off).
    public var metrics: MetricsListenerSettings?
    /// The deletion receipts' public keys (SIWA_RECEIPT_JWKS_FILE), served
    /// at /.well-known/siwa-receipts.json; nil: that route answers 404.
    public var receiptKeys: ES256KeySet?
    /// The `/v1` key cache's heartbeat (APIKeyCache): not a setting, the
    /// standard one in production; tests shorten it.
    public var apiKeyCacheHeartbeat: APIKeyCache.Heartbeat = .standard
    /// The clock identity tokens are verified by: not a setting, the
    /// system's in production; tests verify Apple's genuine (expired)
    /// tokens at their issue time.
    public var identityTokenClock: @Sendable () -> Date = { Date() }

    public init(environment reader: SettingsReader) throws {
        typealias S = SettingsCatalog
        database = try DatabaseSettings(reader: reader)
        http = try HTTPListenerSettings(reader: reader)
        appleKeys = try AppleKeysSettings(reader: reader)
        // Sign-in's (SignInSettings): read here too, so that a bad value is
        // refused whether sign-in is on or off, as before sign-in read it.
        _ = try reader.url(S.appleBaseURL)
        notificationRoute = try NotificationRouteSettings(reader: reader)
        inbox = try .ingest(reader: reader)
        events = try EventRouter(reader: reader)
        signInRequires = try SignInRequirement(reader: reader)
        clients = try AppleClientsSettings.read(reader).clients
        rejections = try RejectionWriter.Options(reader: reader)
        jobMaxRunSeconds = try JobWorker.Options.maxRunSeconds(reader, leaseSeconds: try reader.number(S.jobLease))
        log = try LogSettings(environment: reader)
        signIn = try SignInSettings.read(reader)
        tokenValidation = try TokenValidationSettings(environment: reader)
        admin = try AdminListenerSettings.read(reader)
        api = try APIListenerSettings.read(reader)
        metrics = try MetricsListenerSettings.read(reader)
        receiptKeys = try ReceiptSettings.publishedKeys(reader)
        // Refused here, in plain words, rather than as a bind error.
        var listeners = [(host: http.host, port: http.port, name: S.httpPort.name)]
        if let admin { listeners.append((host: admin.host, port: admin.port, name: S.adminHTTPPort.name)) }
        if signIn != nil, let api { listeners.append((host: api.host, port: api.port, name: S.apiHTTPPort.name)) }
        if let metrics { listeners.append((host: metrics.host, port: metrics.port, name: S.metricsHTTPPort.name)) }
        for (index, listener) in listeners.enumerated() {
            for other in listeners[..<index] where Self.collide((listener.host, listener.port), (other.host, other.port)) {
                throw SettingError(listener.name, "\(listener.port) is \(other.name) too, on the same address: each listener needs a port of its own")
            }
        }
        guard inbox.lanes < database.maxConnections else {
            throw SettingError(S.ingestWriters.name, "must be below SIWA_DATABASE_MAX_CONNECTIONS (\(database.maxConnections))")
        }
    }

    /// Two listeners that cannot both bind: one port (not 0, any free
    /// one) on one address, or on a wildcard address.
    static func collide(_ a: (host: String, port: Int), _ b: (host: String, port: Int)) -> Bool {
        let wildcards: Set<String> = ["0.0.0.0", "::", "[::]", "*", ""]
        return a.port != 0 && a.port == b.port && (a.host == b.host || wildcards.contains(a.host) || wildcards.contains(b.host))
    }
}
