import AccountStore

/// A process's own PostgreSQL connection: SIWA_DATABASE_URL and its pool size.
public struct DatabaseSettings: Sendable {
    /// Secret (it carries a password): never logged as it is.
    public var url: String
    public var maxConnections: Int

    /// - Parameter defaultMaxConnections: a default that depends on the
    ///   process's other settings (the worker's concurrency); the catalog
    ///   documents it. Otherwise the catalog's.
    public init(reader: SettingsReader, defaultMaxConnections: Int? = nil) throws {
        url = try reader.required(SettingsCatalog.databaseURL)
        maxConnections = try reader.integer(SettingsCatalog.databaseMaxConnections, default: defaultMaxConnections)
    }

    /// Throws `DatabaseConfigurationError` for a URL that does not parse
    /// (start-up names SIWA_DATABASE_URL).
    public func configuration(maximumConnections: Int? = nil) throws -> DatabaseConfiguration {
        try DatabaseConfiguration(url: url, maximumConnections: maximumConnections ?? maxConnections)
    }
}
