/// The log lines' format and level: every command reads them, each through
/// this one value.
public struct LogSettings: Sendable {
    public enum Format: String, Sendable { case json, text }
    public var format: Format
    public var level: String

    public init(format: Format = .text, level: String = "info") {
        self.format = format
        self.level = level
    }

    public init(environment env: SettingsReader) throws {
        format = Format(rawValue: try env.choice(SettingsCatalog.logFormat)) ?? .text
        level = try env.choice(SettingsCatalog.logLevel)
    }
}
