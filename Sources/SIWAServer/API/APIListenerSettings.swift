import SIWAConfiguration

/// The API listener (`/v1`, for the app's backend), apart from the public
/// one that the reverse proxy exposes to the internet.
public struct APIListenerSettings: Sendable {
    public var host: String
    /// 0: any free port.
    public var port: Int
    /// The public listener's (SIWA_HTTP_IDLE_TIMEOUT_SECONDS).
    public var idleTimeout: Duration
    /// How long an app event stays in `GET /v1/events` (SIWA_EVENTS_FEED_RETENTION_DAYS).
    public var eventsFeedRetentionDays: Double

    /// nil when SIWA_API_HTTP_PORT is `off`: then its host is not read.
    /// Read whether sign-in is on or off, so that a bad value is refused
    /// either way; the listener is bound only with sign-in on.
    static func read(_ reader: SettingsReader) throws -> APIListenerSettings? {
        typealias S = SettingsCatalog
        guard let port = try reader.listenerPort(S.apiHTTPPort) else { return nil }
        return APIListenerSettings(host: try reader.text(S.apiHTTPHost), port: port,
                                   idleTimeout: .seconds(try reader.number(S.httpIdleTimeout)),
                                   eventsFeedRetentionDays: try reader.number(S.eventsFeedRetentionDays))
    }
}
