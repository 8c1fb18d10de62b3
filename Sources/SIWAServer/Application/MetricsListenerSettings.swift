import SIWAConfiguration

/// `siwa serve`'s metrics listener (`/metrics`, `/healthz`, `/readyz`),
/// apart from the public one.
public struct MetricsListenerSettings: Sendable {
    public var host: String
    /// 0: any free port.
    public var port: Int

    /// nil when SIWA_METRICS_HTTP_PORT is `off`: then its host is not read.
    static func read(_ reader: SettingsReader) throws -> MetricsListenerSettings? {
        guard let port = try reader.listenerPort(SettingsCatalog.metricsHTTPPort) else { return nil }
        return MetricsListenerSettings(host: try reader.text(SettingsCatalog.metricsHTTPHost), port: port)
    }
}
