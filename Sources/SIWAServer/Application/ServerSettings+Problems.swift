import AccountStore
import AccountLifecycle
import SIWAConfiguration

extension ServerSettings {
    /// Every problem of serve's settings, each component read on its own
    /// (`siwa check`), where `init(environment:)` stops at the first; then
    /// the whole, for the checks across components. Some may repeat.
    public static func problems(_ reader: SettingsReader) -> [any Error] {
        typealias S = SettingsCatalog
        var problems: [any Error] = []
        func attempt(_ read: () throws -> Void) {
            do { try read() } catch { problems.append(error) }
        }
        attempt { _ = try DatabaseSettings(reader: reader) }
        attempt { _ = try HTTPListenerSettings(reader: reader) }
        attempt { _ = try AppleKeysSettings(reader: reader) }
        attempt { _ = try AppleClientsSettings.read(reader) }
        attempt { _ = try reader.url(S.appleBaseURL) }
        attempt { _ = try NotificationRouteSettings(reader: reader) }
        attempt { _ = try InboxWriter.Options.ingest(reader: reader) }
        attempt { _ = try EventRouter(reader: reader) }
        attempt { _ = try SignInRequirement(reader: reader) }
        attempt { _ = try RejectionWriter.Options(reader: reader) }
        attempt { _ = try JobWorker.Options.maxRunSeconds(reader, leaseSeconds: try reader.number(S.jobLease)) }
        attempt { _ = try LogSettings(environment: reader) }
        attempt { _ = try SignInSettings.read(reader) }
        attempt { _ = try TokenValidationSettings(environment: reader) }
        attempt { _ = try AdminListenerSettings.read(reader) }
        attempt { _ = try APIListenerSettings.read(reader) }
        attempt { _ = try ReceiptSettings.publishedKeys(reader) }
        attempt { _ = try ServerSettings(environment: reader) }
        return problems
    }
}
