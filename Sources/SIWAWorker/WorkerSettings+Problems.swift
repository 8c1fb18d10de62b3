import AccountLifecycle
import SIWAConfiguration

extension WorkerSettings {
    /// Every problem of the worker's settings, each component read on its
    /// own (`siwa check`), where `init(environment:)` stops at the first;
    /// then the whole, for the checks across components. Some may repeat.
    public static func problems(_ reader: SettingsReader) -> [any Error] {
        var problems: [any Error] = []
        func attempt(_ read: () throws -> Void) {
            do { try read() } catch { problems.append(error) }
        }
        attempt { _ = try DatabaseSettings(reader: reader, defaultMaxConnections: 8) }
        attempt { _ = try JobWorker.Options(reader: reader) }
        attempt { _ = try PurgeSettings(reader: reader) }
        attempt { _ = try LogSettings(environment: reader) }
        attempt { _ = try SignInSettings.read(reader) }
        attempt { _ = try TokenValidationSettings(environment: reader) }
        attempt { _ = try ReceiptSettings.read(reader) }
        attempt { _ = try MaintenanceSettings(reader: reader) }
        attempt { _ = try ListenerAddress.workerMetrics(reader: reader) }
        attempt { _ = try AppWebhookTarget.read(reader) }
        attempt { _ = try WorkerSettings(environment: reader) }
        return problems
    }
}
