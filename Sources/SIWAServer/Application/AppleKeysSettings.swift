import SIWAConfiguration

/// Apple's public keys (AppleKeySet), which verify notifications and
/// identity tokens, and the client ids those must be for.
public struct AppleKeysSettings: Sendable {
    /// Whom a notification or identity token must be for (`aud`).
    public var audiences: Set<String>
    public var jwksURL: String
    public var refreshInterval: Duration
    /// The least time between two fetches for a key id not yet known.
    public var refetchCooldown: Duration

    public init(reader: SettingsReader) throws {
        audiences = Set(try reader.list(SettingsCatalog.appleClientIDs))
        jwksURL = try reader.url(SettingsCatalog.appleJWKSURL)
        refreshInterval = .seconds(try reader.number(SettingsCatalog.jwksRefresh))
        refetchCooldown = .seconds(try reader.number(SettingsCatalog.jwksRefetchCooldown))
    }
}
