import Foundation
import Testing

/// `siwa users show|delete`, and how every command names a user: `SUB
/// [--team TEAM]`, the team needed only when the sub is a user in several
/// teams. `siwa audit list`'s --actor, --until, --csv and its cursor, and
/// `siwa jobs list --sub`.
@Suite("siwa users, and naming a user", .testDatabases, .timeLimit(.minutes(5)))
struct UsersCommandTests {
    static func seeded() async throws -> (database: TestDatabase, env: [String: String]) {
        let database = try await TestDatabase.create()
        try await database.execute("""
            INSERT INTO siwa.users (apple_sub, apple_team, email, client_id) VALUES
                ('cli.one.0001', 'TEAM123456', 'one@example.com', 'app'),
                ('cli.both.0001', 'TEAM123456', NULL, NULL),
                ('cli.both.0001', 'ABCDE12345', NULL, NULL)
            """)
        return (database, ["SIWA_DATABASE_URL": try await APIKeysTests.adminURL(for: database)])
    }

    @Test func showNamesTheUserWithoutTheirEmailAndAsksForATeamOnlyWhenTheSubIsInSeveral() async throws {
        let (_, env) = try await Self.seeded()
        let shown = try await runSIWA(["users", "show", "cli.one.0001"], environment: env)
        #expect(shown.status == 0, "\(shown.output)")
        #expect(shown.output.contains("TEAM123456") && shown.output.contains("email held"), "\(shown.output)")
        #expect(!shown.output.contains("one@example.com"), "no email address is shown: \(shown.output)")
        let json = try await runSIWA(["users", "show", "cli.one.0001", "--json"], environment: env)
        let object = try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any]
        #expect(object?["has_email"] as? Bool == true && object?["status"] as? String == "active", "\(json.output)")

        let ambiguous = try await runSIWA(["users", "show", "cli.both.0001"], environment: env)
        #expect(ambiguous.status == 2, "\(ambiguous.output)")
        #expect(ambiguous.output.contains("--team: required") && ambiguous.output.contains("ABCDE12345, TEAM123456"),
                "\(ambiguous.output)")
        let chosen = try await runSIWA(["users", "show", "cli.both.0001", "--team", "ABCDE12345"], environment: env)
        #expect(chosen.status == 0 && chosen.output.contains("ABCDE12345"), "\(chosen.output)")

        let unknown = try await runSIWA(["users", "show", "cli.nobody.0001"], environment: env)
        #expect(unknown.status == 1 && unknown.output.contains("no user with Apple sub cli.nobody.0001"), "\(unknown.output)")
        let badTeam = try await runSIWA(["users", "show", "cli.one.0001", "--team", "lower"], environment: env)
        #expect(badTeam.status == 2 && badTeam.output.contains("--team: expected 10 upper-case letters and digits"), "\(badTeam.output)")
        let badSub = try await runSIWA(["audit", "user", "has space"], environment: env)
        #expect(badSub.status == 2 && badSub.output.contains("SUB: an Apple sub is"), "\(badSub.output)")
    }

    /// The deletion DELETE /v1/users/{sub} makes, as the admin's own role,
    /// audited with it; a second one joins the first's purge.
    @Test func deleteSchedulesThePurgeTheAPIWouldAndAuditsTheAdmin() async throws {
        let (database, env) = try await Self.seeded()
        let deleted = try await runSIWA(["users", "delete", "cli.one.0001"], environment: env)
        #expect(deleted.status == 0 && deleted.output.contains("deletion scheduled: job"), "\(deleted.output)")
        #expect(try await database.strings("SELECT status FROM siwa.users WHERE apple_sub = 'cli.one.0001'") == ["deleted"])
        #expect(try await database.strings("""
            SELECT args->>'event_type' || ' ' || (args->>'apple_team') FROM siwa.jobs
            WHERE kind = 'purge_user' AND args->>'apple_sub' = 'cli.one.0001'
            """) == ["app-deletion TEAM123456"])
        #expect(try await database.strings("""
            SELECT actor || ' ' || db_user || ' ' || (details->>'admin') || ' ' || (details->>'merged') || ' ' || apple_team
            FROM siwa.audit_log WHERE action = 'user.deletion_requested' AND apple_sub = 'cli.one.0001'
            """) == ["admin \(APIKeysTests.admin) \(APIKeysTests.admin) false TEAM123456"])
        let again = try await runSIWA(["users", "delete", "cli.one.0001"], environment: env)
        #expect(again.status == 0, "\(again.output)")
        #expect(try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = 'cli.one.0001'") == 1)
        #expect(try await database.strings("""
            SELECT details->>'merged' FROM siwa.audit_log WHERE action = 'user.deletion_requested' ORDER BY seq
            """) == ["false", "true"])
        let jobs = try await runSIWA(["jobs", "list", "--sub", "cli.one.0001"], environment: env)
        #expect(jobs.status == 0 && jobs.output.contains("purge_user") && jobs.output.contains("cli.one.0001"), "\(jobs.output)")
        let none = try await runSIWA(["jobs", "list", "--sub", "cli.both.0001", "--team", "ABCDE12345"], environment: env)
        #expect(none.status == 0 && none.output.contains("no jobs of cli.both.0001"), "\(none.output)")
        let teamAlone = try await runSIWA(["jobs", "list", "--team", "ABCDE12345"], environment: env)
        #expect(teamAlone.status == 2 && teamAlone.output.contains("give --sub too"), "\(teamAlone.output)")

        let unknown = try await runSIWA(["users", "delete", "cli.nobody.0001"], environment: env)
        #expect(unknown.status == 1, "\(unknown.output)")
        // The admin's role changes nothing by itself: only through the function.
        let refused = try await runSIWA(["users", "delete", "cli.both.0001"], environment: env)
        #expect(refused.status == 2, "several teams: \(refused.output)")
        #expect(try await database.scalar("SELECT count(*) FROM siwa.users WHERE status = 'deleted'") == 1)
    }

    @Test func auditListFiltersByActorAndTimeWritesCSVAndPagesWithACursor() async throws {
        let (database, env) = try await Self.seeded()
        for sub in ["cli.one.0001"] {
            #expect(try await runSIWA(["users", "delete", sub], environment: env).status == 0)
        }
        try await database.execute("""
            INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details) VALUES
                ('apple', 'test.first', 'cli.both.0001', 'TEAM123456', '{"n": 1}'),
                ('=cmd', 'test.second', 'cli.both.0001', 'ABCDE12345', '{"text": "a \\"quoted\\", word"}')
            """)
        let admin = try await runSIWA(["audit", "--actor", "admin", "--json"], environment: env)
        let rows = try JSONSerialization.jsonObject(with: Data(admin.output.utf8)) as? [[String: Any]] ?? []
        #expect(rows.count == 1 && rows.first?["action"] as? String == "user.deletion_requested", "\(admin.output)")
        let csv = try await runSIWA(["audit", "--sub", "cli.both.0001", "--csv"], environment: env)
        #expect(csv.status == 0, "\(csv.output)")
        let lines = csv.output.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(lines.first == #""seq","occurred_at","actor","action","apple_sub","apple_team","details""#, "\(csv.output)")
        #expect(lines.count == 3, "\(csv.output)")
        #expect(lines.dropFirst().first?.contains(#""'=cmd","test.second","cli.both.0001","ABCDE12345","{""text"":""a \""quoted\"", word""}""#) == true,
                "quoted, and a formula neutralised: \(csv.output)")
        let oneTeam = try await runSIWA(["audit", "--sub", "cli.both.0001", "--team", "TEAM123456", "--json"], environment: env)
        #expect((try JSONSerialization.jsonObject(with: Data(oneTeam.output.utf8)) as? [Any])?.count == 1, "\(oneTeam.output)")
        let before = try await runSIWA(["audit", "--until", "2020-01-01", "--json"], environment: env)
        #expect(before.status == 0 && before.output.trimmingCharacters(in: .whitespacesAndNewlines) == "[\n\n]"
                || before.output.contains("[]"), "\(before.output)")
        let badRange = try await runSIWA(["audit", "--since", "2026-05-02", "--until", "2026-05-01"], environment: env)
        #expect(badRange.status == 2 && badRange.output.contains("--until must be later than --since"), "\(badRange.output)")
        let both = try await runSIWA(["audit", "--json", "--csv"], environment: env)
        #expect(both.status == 2, "\(both.output)")

        // The cursor: a full page names the next; each page holds older rows only.
        let first = try await runSIWA(["audit", "--sub", "cli.both.0001", "--limit", "1", "--csv"], environment: env)
        let cursor = try #require(first.output.firstMatch(of: /next page: --before (\d+)/)?.1, "\(first.output)")
        #expect(first.output.contains("test.second"))
        let second = try await runSIWA(["audit", "--sub", "cli.both.0001", "--limit", "1", "--csv", "--before", String(cursor)],
                                       environment: env)
        #expect(second.output.contains("test.first") && !second.output.contains("test.second"), "\(second.output)")
        let third = try await runSIWA(["audit", "--sub", "cli.both.0001", "--limit", "1", "--before",
                                       String(second.output.firstMatch(of: /next page: --before (\d+)/)?.1 ?? "1")], environment: env)
        #expect(third.output.contains("no audit rows") && !third.output.contains("next page"), "\(third.output)")
    }
}
