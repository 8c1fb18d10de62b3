import SIWAConfiguration

/// The settings of the maintenance duties that have any (the audit chain's
/// keeper and the pruning of refused deliveries); token validation has its
/// own (TokenValidationSettings), shared with serve.
public struct MaintenanceSettings: Sendable {
    /// How often the audit chain's head is logged.
    public var auditHeadLogInterval: Duration
    /// Refused deliveries older than this are pruned.
    public var rejectionRetentionDays: Int

    public init(reader: SettingsReader) throws {
        auditHeadLogInterval = .seconds(try reader.integer(SettingsCatalog.auditHeadLogMinutes) * 60)
        rejectionRetentionDays = try reader.integer(SettingsCatalog.rejectionRetentionDays)
    }
}
