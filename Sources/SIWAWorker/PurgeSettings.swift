import SIWAConfiguration

/// The purge's own settings: its plan, the role the plan's SQL runs as, and
/// where each completed erasure is appended (ErasureLedger).
public struct PurgeSettings: Sendable {
    /// nil: no SIWA_PURGE_PLAN, only the built-in step runs.
    public var planPath: String?
    /// The role the plan's SQL steps on siwa's database run as.
    public var role: String
    public var ledgerDirectory: String

    public init(reader: SettingsReader) throws {
        planPath = reader.string(SettingsCatalog.purgePlan)
        role = try reader.text(SettingsCatalog.purgeRole)
        ledgerDirectory = try reader.text(SettingsCatalog.erasureLedgerDir)
    }
}
