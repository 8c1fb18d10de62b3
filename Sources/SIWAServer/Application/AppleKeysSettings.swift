import SIWAConfiguration

/// Apple's public keys (AppleKeySet), which verify notifications and
/// identity tokens.
public struct AppleKeysSettings: Sendable {
    public var jwksURL: String
    public var refreshInterval: Duration
    /// The least time between two fetches for a key id not yet known.
    public var refetchCooldown: Duration

    public init(reader: SettingsReader) throws {
        jwksURL = try reader.url(SettingsCatalog.appleJWKSURL)
        refreshInterval = .seconds(try reader.number(SettingsCatalog.jwksRefresh))
        refetchCooldown = .seconds(try reader.number(SettingsCatalog.jwksRefetchCooldown))
    }
}
