import AccountLifecycle
import AccountStore
import AppleSignIn
import Foundation

/// Everything `siwa serve` is configured with (declared in SettingsCatalog).
public struct ServerSettings: Sendable {
    public var databaseURL: String
    public var databaseMaxConnections: Int
    public var host: String
    public var port: Int
    public var clientIDs: Set<String>
    public var jwksURL: String
    public var appleBaseURL: String
    public var jwksRefreshInterval: Double
    public var jwksRefetchCooldown: Double
    public var maxBodyBytes: Int
    /// Seconds a connection may stay idle (no request, or a request whose
    /// head or body stopped arriving) before the server closes it.
    public var httpIdleTimeout: Double
    public var ingestWriters: Int
    public var ingestMaxBatch: Int
    public var ingestTimeout: Double
    public var onConsentRevoked: ConsentRevokedPolicy
    /// Under `purge`: seconds a consent revocation's purge waits (0: at once).
    public var consentRevokedPurgeDelaySeconds: Int
    /// What POST /v1/sign-in needs beside the identity token.
    public var signInRequires: SignInRequirement
    public var rejectionsPerMinute: Int
    /// Seconds a refusal is held during a flood of junk (0: never).
    public var floodDelay: Double
    /// The worker's SIWA_JOB_MAX_RUN_SECONDS: `/metrics` counts running jobs
    /// older than this as overdue.
    public var jobMaxRunSeconds: Double
    public var log: LogSettings
    /// nil: sign-in is off (no `/v1` routes).
    public var signIn: SignInSettings?
    /// When a stored refresh token is first due for validation.
    public var tokenValidation: TokenValidationSettings
    /// nil: no admin listener (SIWA_ADMIN_HTTP_PORT=off).
    public var admin: AdminListenerSettings?
    /// The deletion receipts' public keys (SIWA_RECEIPT_JWKS_FILE), served
    /// at /.well-known/siwa-receipts.json; nil: that route answers 404.
    public var receiptKeys: ES256KeySet?
    /// The `/v1` key cache's heartbeat (APIKeyCache): not a setting, the
    /// standard one in production; tests shorten it.
    public var apiKeyCacheHeartbeat: APIKeyCache.Heartbeat = .standard

    public init(environment env: SettingsReader) throws {
        typealias S = SettingsCatalog
        databaseURL = try env.required(S.databaseURL)
        databaseMaxConnections = try env.integer(S.databaseMaxConnections)
        host = try env.text(S.httpHost)
        port = try env.integer(S.httpPort)
        clientIDs = Set(try env.list(S.appleClientIDs))
        jwksURL = try env.url(S.appleJWKSURL)
        appleBaseURL = try env.url(S.appleBaseURL)
        jwksRefreshInterval = try env.number(S.jwksRefresh)
        jwksRefetchCooldown = try env.number(S.jwksRefetchCooldown)
        maxBodyBytes = try env.integer(S.maxBodyBytes)
        httpIdleTimeout = try env.number(S.httpIdleTimeout)
        ingestWriters = try env.integer(S.ingestWriters)
        ingestMaxBatch = try env.integer(S.ingestMaxBatch)
        ingestTimeout = try env.number(S.ingestTimeout)
        onConsentRevoked = ConsentRevokedPolicy(rawValue: try env.choice(S.onConsentRevoked)) ?? .purge
        consentRevokedPurgeDelaySeconds = try env.integer(S.consentRevokedPurgeDelayDays) * 86400
        signInRequires = SignInRequirement(rawValue: try env.choice(S.signInRequires)) ?? .code
        rejectionsPerMinute = try env.integer(S.rejectionsPerMinute)
        floodDelay = try env.number(S.floodDelay)
        jobMaxRunSeconds = try WorkerSettings.maxRunSeconds(env, leaseSeconds: try env.number(S.jobLease))
        log = try LogSettings(environment: env)
        signIn = try SignInSettings.read(env)
        tokenValidation = try TokenValidationSettings(environment: env)
        admin = try AdminListenerSettings.read(env)
        receiptKeys = try ReceiptSettings.publishedKeys(env)
        guard ingestWriters < databaseMaxConnections else {
            throw SettingError(S.ingestWriters.name, "must be below SIWA_DATABASE_MAX_CONNECTIONS (\(databaseMaxConnections))")
        }
    }
}

/// The admin listener (`/admin`), apart from the public one.
public struct AdminListenerSettings: Sendable {
    public var host: String
    /// 0: any free port.
    public var port: Int
    public var authFailuresPerMinute: Int

    /// nil when SIWA_ADMIN_HTTP_PORT is `off`.
    static func read(_ env: SettingsReader) throws -> AdminListenerSettings? {
        typealias S = SettingsCatalog
        guard let port = try env.listenerPort(S.adminHTTPPort) else { return nil }
        return AdminListenerSettings(host: try env.text(S.adminHTTPHost), port: port,
                                     authFailuresPerMinute: try env.integer(S.adminAuthFailuresPerMinute))
    }
}

public struct LogSettings: Sendable {
    public enum Format: String, Sendable { case json, text }
    public var format: Format
    public var level: String

    public init(format: Format = .text, level: String = "info") {
        self.format = format
        self.level = level
    }

    public init(environment env: SettingsReader) throws {
        format = Format(rawValue: try env.choice(SettingsCatalog.logFormat)) ?? .text
        level = try env.choice(SettingsCatalog.logLevel)
    }
}
