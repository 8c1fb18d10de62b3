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
        guard value.count == 10, value.allSatisfy({ ($0.isASCII && $0.isUppercase) || $0.isASCII && $0.isNumber }) else {
            throw SettingError(setting.name, "expected 10 upper-case letters and digits, got '\(value.prefix(40))'")
        }
        return value
    }
}

/// The worker's daily check of stored refresh tokens.
public struct TokenValidationSettings: Sendable {
    /// Hours between two checks of one token; nil: validation is off.
    public var periodHours: Int?
    /// Calls to Apple per second per worker; nil: no cap.
    public var requestsPerSecond: Int?

    public init(periodHours: Int? = 24, requestsPerSecond: Int? = 20) {
        self.periodHours = periodHours
        self.requestsPerSecond = requestsPerSecond
    }

    public init(environment env: SettingsReader) throws {
        typealias S = SettingsCatalog
        let hours = try env.integer(S.refreshValidationHours)
        guard hours == 0 || hours >= 24 else {
            throw SettingError(S.refreshValidationHours.name,
                               "expected 0 (off) or at least 24 (Apple asks that a refresh token be validated at most once a day), got '\(hours)'")
        }
        periodHours = hours == 0 ? nil : hours
        let rate = try env.integer(S.appleRequestsPerSecond)
        requestsPerSecond = rate == 0 ? nil : rate
    }
}
