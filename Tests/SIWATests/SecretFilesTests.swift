import AccountLifecycle
import AccountStore
import Foundation
import SIWAConfiguration
import Testing

/// Secrets from files: `SIWA_X_FILE` beside `SIWA_X`, and systemd
/// credentials (`$CREDENTIALS_DIRECTORY`) by the setting's name.
@Suite("Secrets in files and credentials")
struct SecretFilesTests {
    static let url = "postgres://siwa_serve:from-a-file@db.internal:5432/siwa?sslmode=disable"

    @Test func aSecretIsReadFromTheFileItsFileVariableNames() throws {
        let directory = try Self.directory()
        let file = try Self.write("\(Self.url)\n", to: directory, "database-url")
        let reader = SettingsReader(["SIWA_DATABASE_URL_FILE": file])
        #expect(reader.problems.isEmpty)
        // The trailing newline of `echo URL > file` is not part of it.
        #expect(try reader.required(SettingsCatalog.databaseURL) == Self.url)
        #expect(try DatabaseSettings(reader: reader).url == Self.url)
        // A known name, not a typo.
        #expect(reader.unknownNames().isEmpty)
    }

    @Test func aSecretIsReadFromTheCredentialOfItsName() throws {
        let credentials = try Self.directory()
        let secret = "whsec_" + Data(repeating: 7, count: 32).base64EncodedString()
        _ = try Self.write(secret, to: credentials, "SIWA_APP_WEBHOOK_SECRET")
        _ = try Self.write(Self.url, to: credentials, "SIWA_DATABASE_URL")
        let reader = SettingsReader(["CREDENTIALS_DIRECTORY": credentials.path,
                                     "SIWA_APP_WEBHOOK_URL": "https://app.example/siwa/events"])
        #expect(reader.problems.isEmpty)
        #expect(try reader.optional(SettingsCatalog.appWebhookSecret) == secret)
        #expect(try reader.required(SettingsCatalog.databaseURL) == Self.url)
        let target = try #require(try AppWebhookTarget.read(reader))
        #expect(target.keys.count == 1)
    }

    @Test func aKeyFileSettingIsTheCredentialsPath() throws {
        let credentials = try Self.directory()
        let path = try Self.write("-----BEGIN PRIVATE KEY-----\n...\n", to: credentials, "SIWA_RECEIPT_KEY_FILE")
        let reader = SettingsReader(["CREDENTIALS_DIRECTORY": credentials.path])
        #expect(reader.string(SettingsCatalog.receiptKeyFile) == path)
        // The same path given as the variable too (an old unit's
        // Environment= line) is one source, not two.
        #expect(SettingsReader(["CREDENTIALS_DIRECTORY": credentials.path, "SIWA_RECEIPT_KEY_FILE": path]).problems.isEmpty)
        let other = SettingsReader(["CREDENTIALS_DIRECTORY": credentials.path, "SIWA_RECEIPT_KEY_FILE": "/etc/siwa/other.pem"])
        #expect(other.problems["SIWA_RECEIPT_KEY_FILE"]?.description
            == "SIWA_RECEIPT_KEY_FILE: is given 2 ways (SIWA_RECEIPT_KEY_FILE, the credential SIWA_RECEIPT_KEY_FILE ($CREDENTIALS_DIRECTORY)): keep one")
    }

    /// The units' default when the credential's file does not exist
    /// (`SetCredential=NAME:\n`): no value, so the env file's is used.
    @Test func aBlankCredentialIsNoValue() throws {
        let credentials = try Self.directory()
        _ = try Self.write("\n", to: credentials, "SIWA_DATABASE_URL")
        _ = try Self.write("\n", to: credentials, "SIWA_APPLE_PRIVATE_KEY_FILE")
        let reader = SettingsReader(["CREDENTIALS_DIRECTORY": credentials.path, "SIWA_DATABASE_URL": Self.url])
        #expect(reader.problems.isEmpty)
        #expect(try reader.required(SettingsCatalog.databaseURL) == Self.url)
        #expect(reader.string(SettingsCatalog.applePrivateKeyFile) == nil)
    }

    @Test func aSecretGivenTwoWaysIsAConfigurationError() throws {
        let directory = try Self.directory()
        let file = try Self.write(Self.url, to: directory, "database-url")
        let reader = SettingsReader(["SIWA_DATABASE_URL": Self.url, "SIWA_DATABASE_URL_FILE": file])
        let expected = "SIWA_DATABASE_URL: is given 2 ways (SIWA_DATABASE_URL, SIWA_DATABASE_URL_FILE): keep one"
        #expect(reader.problems["SIWA_DATABASE_URL"]?.description == expected)
        #expect(reader.string(SettingsCatalog.databaseURL) == nil)
        #expect(throws: SettingError.self) { try reader.required(SettingsCatalog.databaseURL) }
        do {
            _ = try DatabaseSettings(reader: reader)
            Issue.record("two sources were accepted")
        } catch {
            #expect("\(error)" == expected)
        }
        // The credential counts as a third.
        _ = try Self.write(Self.url, to: directory, "SIWA_DATABASE_URL")
        let three = SettingsReader(["SIWA_DATABASE_URL": Self.url, "SIWA_DATABASE_URL_FILE": file,
                                    "CREDENTIALS_DIRECTORY": directory.path])
        #expect(three.problems["SIWA_DATABASE_URL"]?.description.contains("is given 3 ways") == true)
    }

    @Test func aFileThatCannotBeReadIsNamed() throws {
        let directory = try Self.directory()
        let missing = SettingsReader(["SIWA_DATABASE_URL_FILE": "/nonexistent/siwa-database-url"])
        #expect(missing.problems["SIWA_DATABASE_URL"]?.description
            == "SIWA_DATABASE_URL: SIWA_DATABASE_URL_FILE: cannot read /nonexistent/siwa-database-url (no such file)")
        let relative = SettingsReader(["SIWA_DATABASE_URL_FILE": "database-url"])
        #expect(relative.problems["SIWA_DATABASE_URL"]?.description
            == "SIWA_DATABASE_URL: SIWA_DATABASE_URL_FILE: database-url: give an absolute path")
        let twoLines = try Self.write("\(Self.url)\nsecond line\n", to: directory, "two-lines")
        let lines = SettingsReader(["SIWA_DATABASE_URL_FILE": twoLines])
        #expect(lines.problems["SIWA_DATABASE_URL"]?.description.contains("has more than one line") == true)
        // Never the value itself.
        #expect(lines.problems["SIWA_DATABASE_URL"]?.description.contains("from-a-file") == false)
    }

    /// The purge plan's secrets, which are no SIWA_ settings, come the same ways.
    @Test func thePlansSecretsComeFromFilesAndCredentials() throws {
        let directory = try Self.directory()
        let secret = "whsec_" + Data(repeating: 9, count: 32).base64EncodedString()
        let plan = Data("""
            {"steps": [
              {"name": "crm", "http": {"url": "https://crm.internal/erase", "secret_env": "CRM_WEBHOOK_SECRET"}},
              {"name": "analytics", "sql": ["DELETE FROM events WHERE apple_sub = $1"], "database_url_env": "ANALYTICS_DATABASE_URL"}
            ]}
            """.utf8)
        let secretFile = try Self.write(secret + "\n", to: directory, "crm-secret")
        _ = try Self.write("postgres://purge:pw@analytics.internal:5432/analytics?sslmode=disable\n", to: directory, "ANALYTICS_DATABASE_URL")
        let parsed = try PurgePlan.parse(plan, environment: ["CRM_WEBHOOK_SECRET_FILE": secretFile,
                                                             "CREDENTIALS_DIRECTORY": directory.path])
        #expect(parsed.steps.count == 2)
        #expect(parsed.environmentNames == ["CRM_WEBHOOK_SECRET", "ANALYTICS_DATABASE_URL"])
        #expect(throws: PurgePlanError.self) {
            try PurgePlan.parse(plan, environment: ["CRM_WEBHOOK_SECRET_FILE": secretFile, "CRM_WEBHOOK_SECRET": secret,
                                                    "CREDENTIALS_DIRECTORY": directory.path])
        }
        do {
            _ = try PurgePlan.parse(plan, environment: ["CREDENTIALS_DIRECTORY": directory.path])
            Issue.record("a plan without its secret was accepted")
        } catch {
            #expect("\(error)" == "step 'crm': http.secret_env names CRM_WEBHOOK_SECRET, which is not set (nor CRM_WEBHOOK_SECRET_FILE, nor a credential CRM_WEBHOOK_SECRET)")
        }
    }

    static func directory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-secrets-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        return directory
    }

    static func write(_ text: String, to directory: URL, _ name: String) throws -> String {
        let file = directory.appendingPathComponent(name)
        try Data(text.utf8).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        return file.path
    }
}
