import AccountLifecycle
import AccountStore
import SIWAConfiguration

// The settings of the notification path's components, each read where its
// value is defined: the route, the event router, the inbox writer and the
// refusals' writer.

/// POST /apple/notifications: the largest body it reads, and how long a
/// refusal is held during a flood of junk.
public struct NotificationRouteSettings: Sendable {
    public var maxBodyBytes: Int
    /// 0: never held.
    public var floodDelay: Duration

    public init(reader: SettingsReader) throws {
        maxBodyBytes = try reader.integer(SettingsCatalog.maxBodyBytes)
        floodDelay = .seconds(try reader.number(SettingsCatalog.floodDelay))
    }
}

extension EventRouter {
    public init(reader: SettingsReader) throws {
        typealias S = SettingsCatalog
        let policy = ConsentRevokedPolicy(rawValue: try reader.choice(S.onConsentRevoked)) ?? .purge
        self.init(onConsentRevoked: policy,
                  consentRevokedPurgeDelaySeconds: try reader.integer(S.consentRevokedPurgeDelayDays) * 86400)
    }
}

extension RoundTripBatching {
    /// The inbox writer's (InboxWriter.Options): SIWA_INGEST_*.
    public static func ingest(reader: SettingsReader) throws -> RoundTripBatching {
        var options = RoundTripBatching()
        options.lanes = try reader.integer(SettingsCatalog.ingestWriters)
        options.maxBatch = try reader.integer(SettingsCatalog.ingestMaxBatch)
        options.timeout = .seconds(try reader.number(SettingsCatalog.ingestTimeout))
        return options
    }
}

extension RejectionWriter.Options {
    public init(reader: SettingsReader) throws {
        self.init()
        perMinute = try reader.integer(SettingsCatalog.rejectionsPerMinute)
    }
}
