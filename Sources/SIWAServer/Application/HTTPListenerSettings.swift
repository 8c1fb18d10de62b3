import SIWAConfiguration

/// The public listener's address and how long an idle connection stays open.
public struct HTTPListenerSettings: Sendable {
    public var host: String
    /// 0: any free port.
    public var port: Int
    /// How long a connection may stay idle (no request, or a request whose
    /// head or body stopped arriving) before the server closes it.
    public var idleTimeout: Duration

    public init(reader: SettingsReader) throws {
        host = try reader.text(SettingsCatalog.httpHost)
        port = try reader.integer(SettingsCatalog.httpPort)
        idleTimeout = .seconds(try reader.number(SettingsCatalog.httpIdleTimeout))
    }
}
