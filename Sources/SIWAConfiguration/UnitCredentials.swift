/// The systemd credentials the packaged units load: a secret (a database
/// URL with its password, a webhook secret) or a key file each unit gets a
/// private copy of, as `LoadCredential=NAME:FILE` beside an empty
/// `SetCredential=NAME:`, the default when FILE does not exist (so a value
/// still in an env file keeps working, and an optional key can be absent).
/// siwa reads the credential named as the setting (`SecretValue`); the env
/// files and docs/operations.md name these files, and a test checks the
/// unit files' lines against this table.
public enum UnitCredentials {
    public struct Credential: Sendable, Equatable {
        public let setting: String
        public let file: String
    }

    public static let serve: [Credential] = [
        .init(setting: SettingsCatalog.databaseURL.name, file: "/etc/siwa/serve.database-url"),
        .init(setting: SettingsCatalog.applePrivateKeyFile.name, file: "/etc/siwa/apple-key.p8"),
        .init(setting: SettingsCatalog.tokenEncryptionKeysFile.name, file: "/etc/siwa/token-keys"),
    ]

    public static let worker: [Credential] = [
        .init(setting: SettingsCatalog.databaseURL.name, file: "/etc/siwa/worker.database-url"),
        .init(setting: SettingsCatalog.applePrivateKeyFile.name, file: "/etc/siwa/apple-key.p8"),
        .init(setting: SettingsCatalog.tokenEncryptionKeysFile.name, file: "/etc/siwa/token-keys"),
        .init(setting: SettingsCatalog.receiptKeyFile.name, file: "/etc/siwa/receipt-key.pem"),
        .init(setting: SettingsCatalog.appWebhookSecret.name, file: "/etc/siwa/worker.app-webhook-secret"),
        .init(setting: SettingsCatalog.appWebhookSecretNext.name, file: "/etc/siwa/worker.app-webhook-secret-next"),
    ]

    /// `siwa migrate` as the schema owner: the owner's URL.
    public static let migrate: [Credential] = [
        .init(setting: SettingsCatalog.databaseURL.name, file: "/etc/siwa/migrate.database-url"),
    ]

    /// The units (by their env file) that load `setting`, with the file.
    public static func loading(_ setting: String, for file: Setting.EnvFile) -> [(unit: String, file: String)] {
        let units: [(String, Setting.EnvFile, [Credential])] = [
            ("siwa-serve.service", .serve, serve), ("siwa-worker.service", .worker, worker), ("siwa-migrate.service", .migrate, migrate),
        ]
        return units.filter { file == .shared ? $0.1 != .migrate : $0.1 == file }.compactMap { unit, _, credentials in
            credentials.first { $0.setting == setting }.map { (unit, $0.file) }
        }
    }
}
