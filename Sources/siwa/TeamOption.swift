import ArgumentParser
import SIWAConfiguration

/// `--team`: which developer team a sub given on the command line is in
/// (Apple's subs are team-scoped: one string may be a user in two teams).
/// Optional while siwa serves one team (SIWA_APPLE_TEAM_ID, or a
/// SIWA_APPLE_CLIENTS_FILE naming one).
struct TeamOption: ParsableArguments {
    @Option(help: ArgumentHelp("The team of the sub (10 upper-case letters and digits); default: the one team siwa serves (SIWA_APPLE_TEAM_ID, or the only team of SIWA_APPLE_CLIENTS_FILE).",
                               valueName: "team-id"))
    var team: String?

    /// `--team`, checked, else the one team configured; the command ends
    /// (exit status 2) when neither says.
    func resolved(_ env: SettingsReader = SettingsReader()) -> String {
        if let team {
            guard SignInSettings.isAppleIdentifier(team) else {
                Startup.fail("--team: expected 10 upper-case letters and digits, got '\(team.prefix(40))'")
            }
            return team
        }
        guard let only = AppleClientsSettings.singleTeam(env) else {
            Startup.fail("--team: required (no SIWA_APPLE_TEAM_ID is set, or SIWA_APPLE_CLIENTS_FILE names several teams): a sub is a user only within its team")
        }
        return only
    }
}
