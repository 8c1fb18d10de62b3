import AccountStore
import ArgumentParser
import Logging
import PostgresNIO
import SIWAConfiguration

/// How every command that is about one user names them: `SUB [--team
/// TEAM]` (`siwa users show|delete`, `audit user`, `receipts show`, `tokens
/// validate|forget`). Apple's subs are team-scoped, so `--team` says which
/// team; it may be left out unless the sub is a user in several teams of
/// this database. Lists filter by the same two as options: `--sub SUB
/// [--team TEAM]` (`siwa audit list`, `siwa jobs list`).
struct UserArguments: ParsableArguments {
    @Argument(help: ArgumentHelp("The user's Apple sub.", valueName: "sub"))
    var sub: String

    @Option(help: ArgumentHelp("The sub's developer team (10 upper-case letters and digits); needed only when the sub is a user in several teams.",
                               valueName: "team-id"))
    var team: String?

    func validate() throws {
        try UserArguments.check(sub: sub, team: team)
    }

    /// A refusal of the command line: one line, exit status 2.
    static func check(sub: String?, team: String?) throws {
        if let sub, sub.isEmpty || sub.utf8.count > 255 || !sub.unicodeScalars.allSatisfy({ (0x21...0x7E).contains($0.value) }) {
            throw refusal("SUB: an Apple sub is 1 to 255 printable characters without spaces, got '\(sub.prefix(40))'")
        }
        if let team, !SignInSettings.isAppleIdentifier(team) {
            throw refusal("--team: expected 10 upper-case letters and digits, got '\(team.prefix(40))'")
        }
        if team != nil && sub == nil { throw refusal("--team names the team of --sub: give --sub too") }
    }

    static func refusal(_ message: String) -> ExitCode {
        Startup.report(message, priority: 3)
        return ExitCode(ExitStatus.configuration)
    }

    /// The user's team: `--team`, else the one team in which the sub is a
    /// user. nil when it is a user in no team (the command says so); the
    /// command ends (exit status 2) when it is one in several and no
    /// `--team` says which.
    func team(client: PostgresClient, logger: Logger) async throws -> String? {
        if let team { return team }
        let teams = try await UserAdministration(client: client, logger: logger).teams(ofSub: sub)
        guard teams.count <= 1 else {
            Startup.fail("--team: required: \(sub) is a user in \(teams.count) teams (\(teams.joined(separator: ", "))); say which with --team")
        }
        return teams.first
    }

    /// As `team(client:logger:)`, ending the command (exit status 1) when
    /// the sub is a user in no team.
    func existingTeam(client: PostgresClient, logger: Logger) async throws -> String {
        guard let team = try await team(client: client, logger: logger) else { Startup.fail(unknown, code: 1) }
        return team
    }

    var unknown: String {
        team.map { "no user with Apple sub \(sub) in team \($0)" } ?? "no user with Apple sub \(sub)"
    }
}

/// A list's filter to one user: `--sub SUB [--team TEAM]`, the team
/// optional (without it, the sub's rows in every team, each naming its team).
struct UserFilterOptions: ParsableArguments {
    @Option(help: "Only rows about this Apple user (`sub`).")
    var sub: String?

    @Option(help: ArgumentHelp("With --sub: only its rows in this team (10 upper-case letters and digits); default: every team.",
                               valueName: "team-id"))
    var team: String?

    func validate() throws {
        try UserArguments.check(sub: sub, team: team)
    }
}
