import AccountStore
import ArgumentParser
import Foundation

struct Users: AsyncParsableCommand {
    static let usage = """
        Needs SIWA_DATABASE_URL: your own database role, a member of siwa_admin (delete) or \
        siwa_auditor (show), not the service's. A user is named by their sub, with --team when \
        the sub is a user in several teams of this database.
        """

    static let configuration = CommandConfiguration(
        abstract: "Look at one user, or delete them as the app's backend would.",
        discussion: usage,
        subcommands: [Show.self, Delete.self]
    )

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "One user: status, dates, tokens held; never an email address, a name or a token.",
            discussion: """
                Prints the user's internal id, sub and team, client id, status (active, \
                consent_revoked, deleted), when siwa first heard of them, their latest sign-in, \
                when they were purged, whether siwa holds an email address (not the address), how \
                many Apple refresh tokens it holds and when Apple last confirmed one. Exit status 1 \
                if there is no such user. `siwa audit user SUB` tells their story.
                """ + "\n\n" + Users.usage
        )

        @OptionGroup var user: UserArguments

        @Flag(help: "One JSON object instead of lines.")
        var json = false

        func run() async throws {
            let user = user
            let found = await CommandDatabase.run(label: "siwa.users", refusing: AuditRefusal.self) { client, logger in
                let team = try await user.existingTeam(client: client, logger: logger)
                return try await UserAdministration(client: client, logger: logger).show(appleSub: user.sub, team: team)
            }
            guard let found else { Startup.fail(user.unknown, code: 1) }
            if json {
                print(String(decoding: try AnswerJSON.pretty(found), as: UTF8.self))
                return
            }
            let time = { (date: Date?) in date.map { UTCTime.text($0, .seconds) } ?? "-" }
            print(TextTable.render([
                ["user", String(found.userID)],
                ["sub", found.appleSub],
                ["team", found.appleTeam],
                ["client id", found.clientID ?? "-"],
                ["status", found.status],
                ["since", time(found.createdAt)],
                ["updated", time(found.updatedAt)],
                ["last sign-in", time(found.lastSignInAt)],
                ["purged", time(found.purgedAt)],
                ["email held", found.hasEmail ? "yes" : "no"],
                ["transfer", found.transferState ?? "-"],
                ["refresh tokens", String(found.tokens)],
                ["tokens validated", time(found.tokensValidatedAt)],
            ]))
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a user: the deletion DELETE /v1/users/{sub} makes, as your database role (audited).",
            discussion: """
                Marks the account deleted and enqueues its purge (or joins the pending one), which \
                revokes the user's Apple tokens first and then erases what the purge plan names, \
                exactly as the app's backend asking DELETE /v1/users/{sub}. It is sql/025's \
                siwa.delete_user, which checks the request and writes its audit row \
                (user.deletion_requested, actor admin, with your database role and login) in the \
                same statement. A user already purged gets the purge that did it and nothing new. \
                Prints the job (follow it with `siwa jobs show ID`). Exit status 1 if there is no \
                such user.
                """ + "\n\n" + Users.usage
        )

        @OptionGroup var user: UserArguments

        func run() async throws {
            let user = user
            let scheduled = await CommandDatabase.run(label: "siwa.users", refusing: AuditRefusal.self) { client, logger in
                let team = try await user.existingTeam(client: client, logger: logger)
                return try await UserAdministration(client: client, logger: logger)
                    .delete(appleSub: user.sub, team: team, loginHint: JobsConnection.loginHint)
            }
            guard let scheduled else { Startup.fail(user.unknown, code: 1) }
            if scheduled.alreadyPurged {
                print("\(user.sub) was deleted and purged before: job \(scheduled.jobID) (\(scheduled.state)); nothing new scheduled")
                return
            }
            print("deletion scheduled: job \(scheduled.jobID) (\(scheduled.state)); "
                  + (scheduled.willRevoke ? "Apple tokens will be revoked first"
                                          : "siwa holds no Apple token: the user removes the app at their Apple Account by hand"))
        }
    }
}
