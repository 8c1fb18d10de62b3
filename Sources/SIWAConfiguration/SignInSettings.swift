import AccountLifecycle
import AccountStore
import AppleSignIn
import AsyncHTTPClient
import Foundation

/// What siwa needs to act toward Apple (sign-in, token validation and
/// revocation): the team's Sign in with Apple key, the key ring that
/// encrypts stored tokens, and Apple's endpoints.
///
/// Sign-in is on when the four identifying settings are all given, off when
/// none is; some but not all is a mistake, and start-up names what is missing.
public struct SignInSettings: Sendable {
    public var teamID: String
    public var keyID: String
    public var privateKeyFile: String
    public var keyRingFile: String
    public var appleBaseURL: String
    public var clientSecretTTLSeconds: Int
    /// Seconds each call to Apple may take, whole.
    public var appleRequestTimeout: Double

    /// nil when sign-in is off (none of the four settings given).
    public static func read(_ env: SettingsReader) throws -> SignInSettings? {
        typealias S = SettingsCatalog
        let parts = [S.appleTeamID, S.appleKeyID, S.applePrivateKeyFile, S.tokenEncryptionKeysFile]
        let given = parts.filter { env.string($0) != nil }
        if given.isEmpty { return nil }
        if let missing = parts.first(where: { env.string($0) == nil }) {
            throw SettingError(missing.name, "is required when \(given.map(\.name).joined(separator: ", ")) \(given.count == 1 ? "is" : "are") set (sign-in needs \(parts.map(\.name).joined(separator: ", ")))")
        }
        return try SignInSettings(env)
    }

    private init(_ env: SettingsReader) throws {
        typealias S = SettingsCatalog
        teamID = try Self.appleIdentifier(env, S.appleTeamID)
        keyID = try Self.appleIdentifier(env, S.appleKeyID)
        privateKeyFile = try env.required(S.applePrivateKeyFile)
        keyRingFile = try env.required(S.tokenEncryptionKeysFile)
        appleBaseURL = try env.url(S.appleBaseURL)
        if appleBaseURL.hasSuffix("/") { appleBaseURL.removeLast() }
        clientSecretTTLSeconds = try env.integer(S.clientSecretTTL)
        appleRequestTimeout = try env.number(S.appleRequestTimeout)
    }

    /// Team ids and key ids are 10 characters, upper-case letters and digits.
    private static func appleIdentifier(_ env: SettingsReader, _ setting: Setting) throws -> String {
        let value = try env.required(setting)
        guard isAppleIdentifier(value) else {
            throw SettingError(setting.name, "expected 10 upper-case letters and digits, got '\(value.prefix(40))'")
        }
        return value
    }

    /// A team id or key id as Apple writes them: 10 upper-case letters and digits.
    public static func isAppleIdentifier(_ value: String) -> Bool {
        value.count == 10 && value.allSatisfy { $0.isASCII && ($0.isUppercase || $0.isNumber) }
    }
}

/// SIWA_REFRESH_VALIDATION_HOURS, SIWA_APPLE_REQUESTS_PER_SECOND and
/// SIWA_VALIDATION_INVALID_GRANT_PAUSE_PERCENT, read into token
/// validation's own settings value.
extension TokenValidationSettings {
    public init(environment env: SettingsReader) throws {
        typealias S = SettingsCatalog
        let hours = try env.integer(S.refreshValidationHours)
        guard hours == 0 || hours >= 24 else {
            throw SettingError(S.refreshValidationHours.name,
                               "expected 0 (off) or at least 24 (Apple asks that a refresh token be validated at most once a day), got '\(hours)'")
        }
        let rate = try env.integer(S.appleRequestsPerSecond)
        self.init(periodHours: hours == 0 ? nil : hours, requestsPerSecond: rate == 0 ? nil : rate,
                  invalidGrantPausePercent: try env.integer(S.validationInvalidGrantPausePercent))
    }
}

/// What serve and worker need to act toward Apple, built from
/// `SignInSettings`: the client for `/auth/token` and `/auth/revoke` (its
/// secret signed with the team's `.p8` key), and the token key ring.
public struct AppleAccess: Sendable {
    public let apple: AppleAuthClient
    /// Owned here: shut it down when done (`HTTPClientService`).
    public let httpClient: HTTPClient
    public let keyRing: TokenKeyRing
    /// Said at start-up: the key ring's file is readable by others.
    public let warnings: [String]

    /// Reads the `.p8` key and the key ring; one-line errors naming the file.
    public init(_ settings: SignInSettings) throws {
        let key: AppleClientSecretKey
        do {
            key = try AppleClientSecretKey.load(p8Path: settings.privateKeyFile, teamID: settings.teamID, keyID: settings.keyID)
        } catch {
            throw SettingError(SettingsCatalog.applePrivateKeyFile.name, "\(error)")
        }
        let loaded: (ring: TokenKeyRing, warning: String?)
        do { loaded = try TokenKeyRing.load(path: settings.keyRingFile) } catch {
            throw SettingError(SettingsCatalog.tokenEncryptionKeysFile.name, "\(error)")
        }
        keyRing = loaded.ring
        warnings = loaded.warning.map { [$0] } ?? []
        let secrets: ClientSecretProvider
        do { secrets = try ClientSecretProvider(key: key, lifetime: .seconds(settings.clientSecretTTLSeconds)) } catch {
            throw SettingError(SettingsCatalog.clientSecretTTL.name, "\(error)")
        }
        httpClient = AppleAuthClient.makeHTTPClient()
        apple = AppleAuthClient(baseURL: settings.appleBaseURL, httpClient: httpClient, secrets: secrets,
                                timeout: .milliseconds(Int64(settings.appleRequestTimeout * 1000)))
    }
}
