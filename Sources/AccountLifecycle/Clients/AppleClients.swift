/// The apps and websites one siwa serves, by client id (Apple's `aud`: an
/// app's bundle id, a website's Services ID), each in the developer team
/// that owns it (SIWA_APPLE_CLIENTS_FILE, or SIWA_APPLE_TEAM_ID with
/// SIWA_APPLE_CLIENT_IDS for one team).
///
/// Apple's `sub` is scoped to a team, so a user is (team, sub): the team
/// comes from the client a notification or identity token is for.
public struct AppleClients: Sendable, Equatable {
    /// Each client id's team.
    public let teams: [String: String]
    /// The client ids that are web clients, and their Return URLs.
    public let web: WebClients

    public init(teams: [String: String], web: WebClients = WebClients()) {
        self.teams = teams
        self.web = web
    }

    /// One team's clients (the one-team settings).
    public init(team: String, clientIDs: [String], web: WebClients = WebClients()) {
        self.init(teams: Dictionary(clientIDs.map { ($0, team) }, uniquingKeysWith: { first, _ in first }), web: web)
    }

    /// The team of `clientID`; nil: not one of siwa's clients.
    public func team(of clientID: String) -> String? { teams[clientID] }

    /// Whom a notification or identity token may be for.
    public var audiences: Set<String> { Set(teams.keys) }

    /// The teams, sorted.
    public var allTeams: [String] { Set(teams.values).sorted() }
}
