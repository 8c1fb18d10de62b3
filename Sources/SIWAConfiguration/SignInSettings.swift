import AccountLifecycle
import AccountStore
import AppleSignIn
import AsyncHTTPClient
import Foundation

/// What siwa needs to act toward Apple (sign-in, token validation and
/// revocation, app transfer): the keys that sign each client's client
/// secret (its team's Sign in with Apple key), the key ring that encrypts
/// stored tokens, and Apple's endpoints.
///
/// One team: sign-in is on when SIWA_APPLE_KEY_ID, SIWA_APPLE_PRIVATE_KEY_FILE
/// and SIWA_TOKEN_ENCRYPTION_KEYS_FILE are all given (with the key's team,
/// SIWA_APPLE_TEAM_ID), off when none is; some but not all is a mistake,
/// and start-up names what is missing. Several teams
/// (SIWA_APPLE_CLIENTS_FILE): on with the key ring, and then every client
/// needs a key.
public struct SignInSettings: Sendable {
    /// Which key signs which client's secrets, and each client's team.
    public var clients: AppleClientsSettings
    public var keyRingFile: String
    public var appleBaseURL: String
    public var clientSecretTTLSeconds: Int
    /// Seconds each call to Apple may take, whole.
    public var appleRequestTimeout: Double

    /// The team of `clientID` as far as its key says: the clients file's,
    /// or the one team's for any client id.
    public func team(of clientID: String) -> String? { clients.key(for: clientID)?.team }

    /// nil when sign-in is off.
    public static func read(_ env: SettingsReader) throws -> SignInSettings? {
        typealias S = SettingsCatalog
        if env.string(S.appleClientsFile) != nil {
            let clients = try AppleClientsSettings.read(env)
            guard env.string(S.tokenEncryptionKeysFile) != nil else {
                if clients.hasKeys {
                    throw SettingError(S.tokenEncryptionKeysFile.name, "is required when SIWA_APPLE_CLIENTS_FILE gives keys (sign-in needs the key ring too)")
                }
                return nil
            }
            if let lacking = clients.clients.teams.keys.sorted().first(where: { clients.key(for: $0) == nil }) {
                throw SettingError(S.appleClientsFile.name, "client \(lacking) has no key (its own key_id and private_key_file, or its team's under \"teams\"): with SIWA_TOKEN_ENCRYPTION_KEYS_FILE set, sign-in needs one for every client")
            }
            return try SignInSettings(env, clients: clients)
        }
        let parts = [S.appleKeyID, S.applePrivateKeyFile, S.tokenEncryptionKeysFile]
        let given = parts.filter { env.string($0) != nil }
        if given.isEmpty { return nil }
        if let missing = ([S.appleTeamID] + parts).first(where: { env.string($0) == nil }) {
            throw SettingError(missing.name, "is required when \(given.map(\.name).joined(separator: ", ")) \(given.count == 1 ? "is" : "are") set (sign-in needs \(([S.appleTeamID] + parts).map(\.name).joined(separator: ", ")))")
        }
        let team = try appleIdentifier(env, S.appleTeamID)
        let key = ClientKeyFile(team: team, keyID: try appleIdentifier(env, S.appleKeyID), path: try env.required(S.applePrivateKeyFile))
        // The worker signs for whatever client a token is for: the client
        // ids are serve's to check.
        let clientIDs = env.string(S.appleClientIDs) == nil ? [] : try env.list(S.appleClientIDs)
        let clients = AppleClientsSettings(clients: AppleClients(team: team, clientIDs: clientIDs), keys: [:], oneTeamKey: key)
        return try SignInSettings(env, clients: clients)
    }

    private init(_ env: SettingsReader, clients: AppleClientsSettings) throws {
        typealias S = SettingsCatalog
        self.clients = clients
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

    /// Reads the `.p8` keys and the key ring; one-line errors naming the file.
    /// `observer`: told of each call to Apple (`AppleCallTelemetry`).
    public init(_ settings: SignInSettings, observer: (any AppleCallObserver)? = nil) throws {
        var loadedKeys: [ClientKeyFile: AppleClientSecretKey] = [:]
        func load(_ file: ClientKeyFile) throws -> AppleClientSecretKey {
            if let key = loadedKeys[file] { return key }
            do {
                let key = try AppleClientSecretKey.load(p8Path: file.path, teamID: file.team, keyID: file.keyID)
                loadedKeys[file] = key
                return key
            } catch {
                let setting = settings.clients.oneTeamKey == nil ? SettingsCatalog.appleClientsFile : SettingsCatalog.applePrivateKeyFile
                throw SettingError(setting.name, "\(error)")
            }
        }
        let perClient = try settings.clients.keys.mapValues(load)
        let oneTeam = try settings.clients.oneTeamKey.map(load)
        let loaded: (ring: TokenKeyRing, warning: String?)
        do { loaded = try TokenKeyRing.load(path: settings.keyRingFile) } catch {
            throw SettingError(SettingsCatalog.tokenEncryptionKeysFile.name, "\(error)")
        }
        keyRing = loaded.ring
        warnings = loaded.warning.map { [$0] } ?? []
        let secrets: ClientSecretProvider
        do {
            secrets = try ClientSecretProvider(keys: perClient, anyClient: oneTeam, lifetime: .seconds(settings.clientSecretTTLSeconds))
        } catch {
            throw SettingError(SettingsCatalog.clientSecretTTL.name, "\(error)")
        }
        httpClient = AppleAuthClient.makeHTTPClient()
        apple = AppleAuthClient(baseURL: settings.appleBaseURL, httpClient: httpClient, secrets: secrets,
                                timeout: .milliseconds(Int64(settings.appleRequestTimeout * 1000)), observer: observer)
    }
}
