import SIWAConfiguration

/// The settings of the maintenance duties that have any (the audit chain's
/// keeper and the pruning of refused deliveries); token validation has its
/// own (TokenValidationSettings), shared with serve.
public struct MaintenanceSettings: Sendable {
    /// How often the audit chain's head is logged.
    public var auditHeadLogInterval: Duration
    /// How often the leading worker verifies the whole audit chain (nil: never).
    public var auditVerifyInterval: Duration?
    /// Refused deliveries older than this are pruned.
    public var rejectionRetentionDays: Int

    public init(reader: SettingsReader) throws {
        auditHeadLogInterval = .seconds(try reader.integer(SettingsCatalog.auditHeadLogMinutes) * 60)
        let verifyMinutes = try reader.integer(SettingsCatalog.auditVerifyMinutes)
        auditVerifyInterval = verifyMinutes == 0 ? nil : .seconds(verifyMinutes * 60)
        rejectionRetentionDays = try reader.integer(SettingsCatalog.rejectionRetentionDays)
    }
}
