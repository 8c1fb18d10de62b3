import AccountLifecycle
import AccountStore
import AppleSignIn
import ArgumentParser
import Foundation
import SIWAConfiguration

struct Transfer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Move the app's users to another developer team (Apple's app transfer, TN3159), within Apple's 60 days.",
        discussion: """
            A user's Apple sub is team-scoped: when the app moves to another team, every user \
            gets a new one (and a Hide My Email user a new relay address). Apple gives both \
            teams 60 days from the transfer and /auth/usermigrationinfo; docs/app-transfer.md \
            is the whole procedure. In order:
              1. the sending team: siwa transfer prepare --to RECEIVING_TEAM_ID, then siwa \
            transfer status until nothing is pending (the worker asks Apple for each user's \
            transfer_sub, at most SIWA_APPLE_REQUESTS_PER_SECOND calls a second);
              2. a buyer with a siwa of their own: siwa transfer export FILE here, siwa \
            transfer import FILE there;
              3. the app is transferred in App Store Connect;
              4. the receiving team: switch the worker's and serve's settings to the receiving \
            team's (SIWA_APPLE_TEAM_ID, SIWA_APPLE_KEY_ID, SIWA_APPLE_PRIVATE_KEY_FILE), restart \
            them, then siwa transfer complete and siwa transfer status. A user who signs in \
            first moves at once (the identity token's transfer_sub).
            Each command needs SIWA_DATABASE_URL: your own database role (a member of siwa_admin), \
            as siwa jobs does; every change goes through a function of sql/023 that checks it and \
            writes its audit row naming that role. prepare and complete also read \
            SIWA_APPLE_TEAM_ID and SIWA_APPLE_CLIENT_IDS (the worker's settings; the first client \
            id, the primary App ID, names the app at Apple unless --client-id says).

            \(SettingsDocs.help(for: .transfer))
            """,
        subcommands: [Prepare.self, Status.self, Export.self, Import.self, Complete.self]
    )

    /// A team id as Apple writes it (as SIWA_APPLE_TEAM_ID is checked).
    static func isTeamID(_ value: String) -> Bool { SignInSettings.isAppleIdentifier(value) }

    /// The transferred app's client id (`--client-id`, else the first of
    /// SIWA_APPLE_CLIENT_IDS, else the only client of SIWA_APPLE_CLIENTS_FILE)
    /// and its team as the settings say (the sending team's before the
    /// transfer, the receiving team's after), or the command ends saying
    /// what is wrong.
    static func app(_ given: String?, _ env: SettingsReader, role: String) -> (client: String, team: String) {
        let clients: AppleClients
        do { clients = try AppleClientsSettings.read(env).clients } catch {
            refuse("\(error) (\(role): run with the worker's settings and your own SIWA_DATABASE_URL)")
        }
        let client: String
        if let given {
            client = given
        } else if let first = (try? env.list(SettingsCatalog.appleClientIDs))?.first {
            client = first
        } else if clients.teams.count == 1, let only = clients.teams.keys.first {
            client = only
        } else {
            refuse("--client-id: required, SIWA_APPLE_CLIENTS_FILE lists several clients (\(clients.teams.keys.sorted().joined(separator: ", ")))")
        }
        guard let team = clients.team(of: client) else {
            refuse("--client-id: '\(client.prefix(100))' is not one of this siwa's clients (\(clients.teams.keys.sorted().joined(separator: ", ")))")
        }
        return (client, team)
    }

    static func refuse(_ message: String) -> Never { Startup.fail(message, code: 1) }

    static func run<T: Sendable>(_ body: @escaping @Sendable (TransferAdministration) async throws -> T) async -> T {
        await CommandDatabase.run(label: "siwa.transfer", refusing: TransferRefused.self) { client, logger in
            try await body(TransferAdministration(client: client, logger: logger))
        }
    }

    static func said(_ start: TransferStart, _ what: String) -> String {
        "\(start.enqueued) users enqueued to \(what); \(start.pending) pending, \(start.done) done already. Follow it with `siwa transfer status`."
    }

    struct Prepare: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The sending team: ask Apple, for every user, a transfer_sub toward the receiving team (as worker jobs).",
            discussion: """
                Run it with the sending team's settings (SIWA_APPLE_TEAM_ID is the team the app is in \
                now), before the transfer or within 60 days after it. Each user not prepared yet \
                gets a transfer_prepare job; the worker that leads maintenance runs them, at most \
                SIWA_APPLE_REQUESTS_PER_SECOND calls a second, and keeps Apple's answer beside the \
                user. Run it again after fixing a failure: users done are skipped.
                """)

        @Option(name: .customLong("to"), help: ArgumentHelp("The receiving team's Team ID (10 upper-case letters and digits).", valueName: "team-id"))
        var to: String

        @Option(help: "The transferred app's client id (default: the first of SIWA_APPLE_CLIENT_IDS, or the only client of SIWA_APPLE_CLIENTS_FILE).")
        var clientID: String?

        func run() async throws {
            guard Transfer.isTeamID(to) else {
                Transfer.refuse("--to: expected a team id, 10 upper-case letters and digits (the receiving team's Membership details), got '\(to.prefix(40))'")
            }
            let env = Startup.reader()
            let (client, source) = Transfer.app(clientID, env, role: "the team the app is in now, the sending team")
            guard to != source else {
                Transfer.refuse("--to \(to) is the team the app is in (SIWA_APPLE_TEAM_ID): give the team it moves to")
            }
            let (target, hint) = (to, JobsConnection.loginHint)
            let start = await Transfer.run { try await $0.prepare(target: target, sourceTeam: source, clientID: client, loginHint: hint) }
            print(Transfer.said(start, "ask Apple for their transfer_sub toward team \(target)"))
        }
    }

    struct Complete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The receiving team: exchange every stored transfer_sub for the user's new sub, and move the user in place.",
            discussion: """
                Run it after the app moved, with the settings switched to the receiving team's \
                (SIWA_APPLE_TEAM_ID, SIWA_APPLE_KEY_ID, SIWA_APPLE_PRIVATE_KEY_FILE) and the worker \
                restarted with them, within 60 days of the transfer. Each user awaiting completion \
                (prepared here, or imported) gets a transfer_complete job: Apple's answer moves the \
                user to the new sub (same siwa user id and data, a user.transferred audit row and \
                app event; a Hide My Email user's new relay address). Users a sign-in moved are done \
                already. Run it again after fixing a failure.
                """)

        @Option(help: "The transferred app's client id (default: the first of SIWA_APPLE_CLIENT_IDS, or the only client of SIWA_APPLE_CLIENTS_FILE).")
        var clientID: String?

        func run() async throws {
            let env = Startup.reader()
            let (client, team) = Transfer.app(clientID, env, role: "the team the app is in now, the receiving team")
            let hint = JobsConnection.loginHint
            let start = await Transfer.run { try await $0.complete(team: team, clientID: client, loginHint: hint) }
            print(Transfer.said(start, "exchange their transfer_sub for their sub in team \(team)"))
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "How many users are done, pending and failed in each step, with Apple's answer.",
            discussion: """
                prepare: asking Apple for the user's transfer_sub (the sending team); complete: \
                exchanging it for the new sub (the receiving team). A pending user with a reason is \
                being retried (the last answer is shown); a failed one needs someone: fix the cause \
                and run the step again. Counts only: no sub, no email.
                """)

        @Flag(help: "One JSON array instead of a table.")
        var json = false

        func run() async throws {
            let lines = await Transfer.run { try await $0.status() }
            if json {
                print(String(decoding: try AnswerJSON.pretty(lines), as: UTF8.self))
            } else if lines.isEmpty {
                print("no transfer: siwa transfer prepare --to TEAM_ID starts one")
            } else {
                var rows = [["TEAM", "STEP", "STATE", "USERS", "APPLE'S ANSWER"]]
                for line in lines {
                    rows.append([line.team ?? "-", line.phase, line.state, String(line.users), line.reason ?? "-"])
                }
                print(TextTable.render(rows))
            }
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write each prepared user's siwa id and transfer_sub to FILE, for a buyer whose own siwa imports it.",
            discussion: """
                JSON Lines: a first line {"siwa_transfer_export":1,"target_team":...,"users":N}, then \
                one {"user_id":...,"transfer_sub":...} per user. No sub, no email, no name: Apple asks \
                that the export "include only the transfer identifier to identify the user". Refused \
                while users are pending, or failed (unless --skip-failed). The file is written mode \
                0600 and must not exist yet.
                """)

        @Argument(help: "The file to write.")
        var file: String

        @Option(name: .customLong("to"), help: ArgumentHelp("The receiving team's Team ID (default: the one prepared for, when there is one).", valueName: "team-id"))
        var to: String?

        @Flag(help: "Export without the users whose step failed.")
        var skipFailed = false

        func run() async throws {
            if let to, !Transfer.isTeamID(to) {
                Transfer.refuse("--to: expected a team id, 10 upper-case letters and digits, got '\(to.prefix(40))'")
            }
            guard !FileManager.default.fileExists(atPath: file) else { Transfer.refuse("\(file) exists already: name a new file") }
            let (given, skip, hint) = (to, skipFailed, JobsConnection.loginHint)
            let (target, users) = await Transfer.run { admin -> (String, [ExportedTransferUser]) in
                let target: String
                if let given { target = given } else { target = try await Self.preparedTeam(admin) }
                return (target, try await admin.export(target: target, skipFailed: skip, loginHint: hint))
            }
            var text = #"{"siwa_transfer_export":1,"target_team":\#(JSONText.quoted(target)),"users":\#(users.count)}"# + "\n"
            for user in users {
                text += #"{"user_id":\#(user.userID),"transfer_sub":\#(JSONText.quoted(user.transferSub))}"# + "\n"
            }
            guard FileManager.default.createFile(atPath: file, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
                Transfer.refuse("\(file): cannot be written")
            }
            print("\(users.count) users written to \(file) for team \(target)")
        }

        /// The one team users are prepared for.
        static func preparedTeam(_ admin: TransferAdministration) async throws -> String {
            let teams = Set(try await admin.status().filter { $0.phase == "prepare" }.compactMap(\.team))
            guard teams.count == 1, let team = teams.first else {
                throw TransferRefused(teams.isEmpty ? "nothing is prepared: run siwa transfer prepare --to TEAM_ID first"
                                                    : "users are prepared for \(teams.sorted().joined(separator: ", ")): say which with --to")
            }
            return team
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A buyer with a siwa of their own: create the users of another siwa's export as awaiting completion.",
            discussion: """
                FILE is what siwa transfer export wrote; its target_team must be this siwa's team \
                (SIWA_APPLE_TEAM_ID, or one of SIWA_APPLE_CLIENTS_FILE's). Each user keeps the seller's siwa user id (the app's data moves \
                keyed by it) and has no sub until siwa transfer complete, or their first sign-in, \
                moves them. Refused, writing nothing, when an id is taken here already.
                """)

        @Argument(help: "The file siwa transfer export wrote.")
        var file: String

        func run() async throws {
            let env = Startup.reader()
            let (target, users) = Self.read(file)
            let teams: [String]
            do { teams = try AppleClientsSettings.read(env).clients.allTeams } catch {
                Transfer.refuse("\(error) (this siwa's teams: run with the worker's settings and your own SIWA_DATABASE_URL)")
            }
            guard teams.contains(target) else {
                Transfer.refuse("\(file) was prepared for team \(target), not for this siwa's (\(teams.joined(separator: ", ")))")
            }
            let team = target
            let hint = JobsConnection.loginHint
            let imported = await Transfer.run { try await $0.importUsers(users, team: team, loginHint: hint) }
            print("\(imported) users imported, awaiting completion: run siwa transfer complete once the app is in team \(team)")
        }

        /// The export's team and users, or the command ends naming the line at fault.
        static func read(_ file: String) -> (String, [ExportedTransferUser]) {
            guard let data = FileManager.default.contents(atPath: file), let text = String(data: data, encoding: .utf8) else {
                Transfer.refuse("\(file): cannot be read")
            }
            struct Header: Decodable {
                let siwa_transfer_export: Int
                let target_team: String
                let users: Int
            }
            let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
            guard let first = lines.first, let header = try? JSONDecoder().decode(Header.self, from: Data(first.utf8)),
                  header.siwa_transfer_export == 1, Transfer.isTeamID(header.target_team) else {
                Transfer.refuse("\(file): line 1 is not the header siwa transfer export writes")
            }
            var users: [ExportedTransferUser] = []
            for (index, line) in lines.dropFirst().enumerated() {
                guard let user = try? JSONDecoder().decode(ExportedTransferUser.self, from: Data(line.utf8)) else {
                    Transfer.refuse("\(file): line \(index + 2) is not {\"user_id\":...,\"transfer_sub\":...}")
                }
                users.append(user)
            }
            guard users.count == header.users, !users.isEmpty else {
                Transfer.refuse("\(file): the header says \(header.users) users, the file holds \(users.count)")
            }
            return (header.target_team, users)
        }
    }
}
