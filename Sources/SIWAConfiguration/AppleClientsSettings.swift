import AccountLifecycle
import AccountStore
import Foundation

/// Which `.p8` key signs a client's client secret: its team's Sign in with
/// Apple key.
public struct ClientKeyFile: Sendable, Equatable, Hashable {
    public let team: String
    public let keyID: String
    public let path: String

    public init(team: String, keyID: String, path: String) {
        self.team = team
        self.keyID = keyID
        self.path = path
    }
}

/// The clients siwa serves and the keys that sign their client secrets,
/// from SIWA_APPLE_CLIENTS_FILE or, for one team, SIWA_APPLE_TEAM_ID,
/// SIWA_APPLE_CLIENT_IDS, SIWA_APPLE_WEB_CLIENT_IDS, SIWA_APPLE_KEY_ID and
/// SIWA_APPLE_PRIVATE_KEY_FILE. The two ways do not mix: with the file set,
/// those five are refused.
public struct AppleClientsSettings: Sendable {
    public let clients: AppleClients
    /// Per client id, its key (its own, or its team's). Empty when none is
    /// given (sign-in off), and for the one-team settings, whose one key
    /// signs for any client id (`oneTeamKey`).
    public let keys: [String: ClientKeyFile]
    /// The one team's key (SIWA_APPLE_KEY_ID and SIWA_APPLE_PRIVATE_KEY_FILE).
    public let oneTeamKey: ClientKeyFile?

    /// The key that signs `clientID`'s secrets.
    public func key(for clientID: String) -> ClientKeyFile? { keys[clientID] ?? oneTeamKey }

    /// Whether any key is given (sign-in's keys; SignInSettings decides).
    public var hasKeys: Bool { oneTeamKey != nil || !keys.isEmpty }

    /// The settings the clients file replaces.
    static let oneTeamSettings = [SettingsCatalog.appleTeamID, SettingsCatalog.appleClientIDs, SettingsCatalog.appleWebClientIDs,
                                  SettingsCatalog.appleKeyID, SettingsCatalog.applePrivateKeyFile]

    public static func read(_ env: SettingsReader) throws -> AppleClientsSettings {
        guard let path = env.string(SettingsCatalog.appleClientsFile) else { return try oneTeam(env) }
        if let mixed = oneTeamSettings.first(where: { env.string($0) != nil }) {
            throw SettingError(mixed.name, "set it in SIWA_APPLE_CLIENTS_FILE instead: with the clients file set, \(oneTeamSettings.map(\.name).joined(separator: ", ")) must be unset")
        }
        let read = Result { () throws(AppleClientsFile.Problem) in try AppleClientsFile.read(path: path) }
        switch read {
        case .success(let settings): return settings
        case .failure(let problem): throw SettingError(SettingsCatalog.appleClientsFile.name, "\(path): \(problem.text)")
        }
    }

    /// The team siwa served before it knew of several (sql/024's
    /// `siwa.existing_rows_team`): SIWA_APPLE_TEAM_ID, or the only team of
    /// SIWA_APPLE_CLIENTS_FILE; nil when none, or several, is.
    public static func singleTeam(_ env: SettingsReader) -> String? {
        if env.string(SettingsCatalog.appleClientsFile) == nil {
            return env.string(SettingsCatalog.appleTeamID).flatMap { SignInSettings.isAppleIdentifier($0) ? $0 : nil }
        }
        guard let settings = try? read(env) else { return nil }
        let teams = settings.clients.allTeams
        return teams.count == 1 ? teams[0] : nil
    }

    private static func oneTeam(_ env: SettingsReader) throws -> AppleClientsSettings {
        typealias S = SettingsCatalog
        let clientIDs = try env.list(S.appleClientIDs)
        guard let team = env.string(S.appleTeamID) else {
            throw SettingError(S.appleTeamID.name, "is required: the team of SIWA_APPLE_CLIENT_IDS (siwa keys users by team and sub; several teams: SIWA_APPLE_CLIENTS_FILE)")
        }
        guard SignInSettings.isAppleIdentifier(team) else {
            throw SettingError(S.appleTeamID.name, "expected 10 upper-case letters and digits, got '\(team.prefix(40))'")
        }
        let keyParts = [S.appleKeyID, S.applePrivateKeyFile]
        var key: ClientKeyFile?
        if let keyID = env.string(S.appleKeyID), let path = env.string(S.applePrivateKeyFile) {
            guard SignInSettings.isAppleIdentifier(keyID) else {
                throw SettingError(S.appleKeyID.name, "expected 10 upper-case letters and digits, got '\(keyID.prefix(40))'")
            }
            key = ClientKeyFile(team: team, keyID: keyID, path: path)
        } else if let given = keyParts.first(where: { env.string($0) != nil }),
                  let missing = keyParts.first(where: { env.string($0) == nil }) {
            throw SettingError(missing.name, "is required when \(given.name) is set (the key that signs the client secret)")
        }
        let web = try WebClients(reader: env, audiences: Set(clientIDs))
        return AppleClientsSettings(clients: AppleClients(team: team, clientIDs: clientIDs, web: web), keys: [:], oneTeamKey: key)
    }

    init(clients: AppleClients, keys: [String: ClientKeyFile], oneTeamKey: ClientKeyFile?) {
        self.clients = clients
        self.keys = keys
        self.oneTeamKey = oneTeamKey
    }
}
