import SIWAConfiguration

/// The admin listener (`/admin`), apart from the public one.
public struct AdminListenerSettings: Sendable {
    public var host: String
    /// 0: any free port.
    public var port: Int
    public var authFailuresPerMinute: Int
    /// The public listener's (SIWA_HTTP_IDLE_TIMEOUT_SECONDS).
    public var idleTimeout: Duration

    /// nil when SIWA_ADMIN_HTTP_PORT is `off`: then its other settings are not read.
    static func read(_ reader: SettingsReader) throws -> AdminListenerSettings? {
        typealias S = SettingsCatalog
        guard let port = try reader.listenerPort(S.adminHTTPPort) else { return nil }
        return AdminListenerSettings(host: try reader.text(S.adminHTTPHost), port: port,
                                     authFailuresPerMinute: try reader.integer(S.adminAuthFailuresPerMinute),
                                     idleTimeout: .seconds(try reader.number(S.httpIdleTimeout)))
    }
}
