import AccountLifecycle
import AccountStore
import AppleSignIn
import AppleSimulator
import AsyncHTTPClient
import Foundation
import NIOHTTP1
import SIWAClient
import SIWAConfiguration
import Testing

/// Several apps and teams on one siwa (issue 21 §3): a company's app and
/// website in one team, an acquired app in another, one notification URL
/// and one `/v1`. Apple's subs are team-scoped, so siwa keys users by team
/// and sub: the same sub string in both teams is two people, each signed
/// in, answered, revoked and purged on their own, and each client's secret
/// is signed with its own team's key (the simulator refuses another team's).
@Suite("Several apps and teams", .testDatabases, .timeLimit(.minutes(10)))
struct SeveralTeamsTests {
    static let teamA = TestEnvironment.team
    static let teamB = "TEAMB67890"
    static let app = "com.example.app"
    static let web = "com.example.web"
    static let acquired = "com.acquired.app"
    static let returnURL = "https://example.com/auth/apple/callback"
    /// One sub string, a user in each team.
    static let shared = "001.shared.0001"

    struct Setup: Sendable {
        let server: ServerHarness
        let worker: WorkerHarness
        let teamAKeys: SimulatedTeamKeyFiles
        let teamBKeys: SimulatedTeamKeyFiles
        let apiKey: String
        var apple: AppleSimulator { server.simulator }
        var database: TestDatabase { server.database }

        static func start() async throws -> Setup {
            let teamAKeys = try SignInFixture.files()
            let teamBKeys = try SimulatedTeamKeyFiles(teamID: teamB, keyID: "KEYB123456", keyRing: [TokenKeyRing.newKeyLine(id: "b1")],
                                                      label: "team-b")
            let clients = teamAKeys.directory.appendingPathComponent("clients.json").path
            try Data("""
                {"teams": {"\(teamA)": {"key_id": "\(teamAKeys.keyID)", "private_key_file": "\(teamAKeys.privateKeyFile)"}},
                 "clients": {
                   "\(app)": {"team": "\(teamA)"},
                   "\(web)": {"team": "\(teamA)", "web": true, "return_urls": ["\(returnURL)"]},
                   "\(acquired)": {"team": "\(teamB)", "key_id": "\(teamBKeys.keyID)", "private_key_file": "\(teamBKeys.privateKeyFile)"}}}
                """.utf8).write(to: URL(fileURLWithPath: clients))
            let simulator = try AppleSimulator()
            teamBKeys.register(with: simulator)
            for (client, team) in [(app, teamA), (web, teamA), (acquired, teamB)] { simulator.assignClient(client, toTeam: team) }
            // The clients file replaces the one team's settings (the fixture's).
            let several = ["SIWA_APPLE_CLIENTS_FILE": clients, "SIWA_APPLE_TEAM_ID": "", "SIWA_APPLE_CLIENT_IDS": "",
                           "SIWA_APPLE_KEY_ID": "", "SIWA_APPLE_PRIVATE_KEY_FILE": ""]
            let server = try await ServerHarness.start(settings: several, signIn: teamAKeys, simulator: simulator)
            let worker = try await WorkerHarness.start(
                database: server.database,
                settings: SignInFixture.settings(teamAKeys, appleBaseURL: server.appleServer.baseURL).merging(several) { $1 })
            return Setup(server: server, worker: worker, teamAKeys: teamAKeys, teamBKeys: teamBKeys,
                         apiKey: try await SignInFixture.apiKey(in: server.database))
        }

        func stop() async {
            await worker.stop()
            await server.stop()
            teamBKeys.remove()
        }

        /// `/v1` through SIWAClient, on the API listener.
        var client: SIWAClient { get throws { try SIWAClient.forTests(apiURL: server.apiURL, key: apiKey) } }

        /// A native sign-in at `client`: Apple's identity token and code.
        func signIn(_ sub: String, at client: String) async throws -> ClientAnswer<SIWAClient.SignedInUser> {
            let token = try apple.identityToken(sub: sub, audience: client, email: "\(client)@privaterelay.appleid.com")
            let code = apple.issueAuthorizationCode(sub: sub, clientID: client, email: "\(client)@privaterelay.appleid.com",
                                                    isPrivateEmail: true)
            return try await self.client.signIn(json: ["identity_token": token, "authorization_code": code])
        }

        /// A web sign-in (code only) at the website.
        func webSignIn(_ sub: String) async throws -> ClientAnswer<SIWAClient.SignedInUser> {
            let code = apple.issueAuthorizationCode(sub: sub, clientID: web, email: "web@privaterelay.appleid.com", isPrivateEmail: true,
                                                    redirectURI: returnURL)
            return try await client.signIn(json: ["authorization_code": code, "client_id": web, "redirect_uri": returnURL])
        }

        func notify(_ type: String, sub: String, at client: String) async throws -> HTTPAnswer {
            try await server.post(token: try apple.notification(type: type, sub: sub, audience: client))
        }

        func users() async throws -> [String] {
            try await database.strings("SELECT apple_team || ' ' || apple_sub || ' ' || status || ' ' || coalesce(client_id, '-') FROM siwa.users ORDER BY 1")
        }
    }

    @Test func twoTeamsThreeClientsEachUserOnTheirOwn() async throws {
        let setup = try await Setup.start()
        try atTestEnd { await setup.stop() }

        // Sign-ins at each client: the sub is one string, the users two.
        let native = try await setup.signIn(Self.shared, at: Self.app)
        #expect(native.status == 200 && native.value?.team == Self.teamA && native.value?.clientId == Self.app,
                "\(native.text)")
        #expect(native.value?.isNewUser == true)
        let website = try await setup.webSignIn(Self.shared)
        #expect(website.status == 200 && website.value?.team == Self.teamA && website.value?.clientId == Self.web,
                "\(website.text)")
        #expect(website.value?.userId == native.value?.userId, "one team's app and website share its users")
        let other = try await setup.signIn(Self.shared, at: Self.acquired)
        #expect(other.status == 200 && other.value?.team == Self.teamB && other.value?.clientId == Self.acquired,
                "\(other.text)")
        #expect(other.value?.isNewUser == true && other.value?.userId != native.value?.userId,
                "the same sub in another team is another person")
        // Each exchange was made with the client's own team's secret (the simulator refuses another's).
        #expect(setup.apple.issuedRefreshTokens.count == 3)

        // Notifications for each client land on its team's user.
        let disabled = try await setup.notify("email-disabled", sub: Self.shared, at: Self.acquired)
        #expect(disabled.status == 200 && disabled.json["team"] as? String == Self.teamB
                && disabled.json["client_id"] as? String == Self.acquired, "\(disabled.text)")
        let appEvent = try await setup.notify("email-enabled", sub: "001.only.a", at: Self.web)
        #expect(appEvent.status == 200 && appEvent.json["team"] as? String == Self.teamA, "\(appEvent.text)")
        #expect(try await setup.database.strings("""
            SELECT apple_team || ' ' || email_forwarding_enabled FROM siwa.users WHERE apple_sub = '\(Self.shared)' ORDER BY 1
            """) == ["\(Self.teamA) true", "\(Self.teamB) false"])
        let unknown = try await setup.notify("email-enabled", sub: Self.shared, at: "com.stranger.app")
        #expect(unknown.status == 400 && unknown.json["error"] as? String == "wrong_aud")

        // /v1 names the team: several are served, so a bare sub is refused.
        let client = try setup.client
        let bare = try await client.lookup(Self.shared)
        #expect(bare.status == 400 && bare.reason == "team_required", "\(bare.text)")
        let byClient = try await client.lookup(Self.shared, in: .clientID(Self.acquired))
        #expect(byClient.value?.user?.team == Self.teamB && byClient.value?.user?.emailForwardingEnabled == false, "\(byClient.text)")
        let byTeam = try await client.lookup(Self.shared, in: .team(Self.teamA))
        #expect(byTeam.value?.user?.clientId == Self.web && byTeam.value?.user?.userId == native.value?.userId, "\(byTeam.text)")
        #expect(try await client.lookup(Self.shared, in: .team("ZZZZZ99999")).reason == "unknown_team")
        #expect(try await client.lookup(Self.shared, in: .clientID("nope")).reason == "unknown_client")

        // Team B's user revokes: their token goes to Apple at once, with
        // team B's secret, and is erased (the purge of their data waits out
        // the grace delay); team A's user, same sub, keeps everything.
        let revoked = try await setup.notify("consent-revoked", sub: Self.shared, at: Self.acquired)
        #expect(revoked.status == 200, "\(revoked.text)")
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait {
            try await setup.database.scalar("""
                SELECT count(*) FROM siwa.jobs WHERE kind = 'purge_user' AND steps_done ? 'apple.revoke_tokens'
                  AND args->>'apple_sub' = '\(Self.shared)' AND args->>'apple_team' = '\(Self.teamB)'
                """) == 1
        }, "\(worker.log.suffix(3000))")
        #expect(setup.apple.revokedTokens.count == 1 && setup.apple.lastRevokeForm?["client_id"] == Self.acquired)
        #expect(try await setup.database.strings("""
            SELECT u.apple_team || ' ' || u.status || ' ' || count(t.user_id) FROM siwa.users AS u
            LEFT JOIN siwa.apple_tokens AS t ON t.user_id = u.id WHERE u.apple_sub = '\(Self.shared)' GROUP BY u.id ORDER BY 1
            """) == ["\(Self.teamA) active 2", "\(Self.teamB) consent_revoked 0"])
        // Every audit row about the sub names its team.
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE apple_sub = '\(Self.shared)' AND apple_team IS NULL
            """) == 0)
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE apple_sub = '\(Self.shared)' AND action = 'token.revoked' AND apple_team = '\(Self.teamB)'
            """) == 1)
        let stillSignedIn = try await client.lookup(Self.shared, in: .team(Self.teamA))
        #expect(stillSignedIn.value?.user?.status == .active && stillSignedIn.value?.user?.refreshToken.stored == true, "\(stillSignedIn.text)")

        // An in-app deletion in team A touches team A's user only.
        let deletion = try await client.delete(Self.shared, in: .clientID(Self.app))
        #expect(deletion.status == 202, "\(deletion.text)")
        #expect(try await setup.worker.wait {
            try await setup.database.scalar("""
                SELECT count(*) FROM siwa.jobs WHERE kind = 'purge_user' AND state = 'completed' AND args->>'apple_team' = '\(Self.teamA)'
                """) == 1
        }, "\(worker.log.suffix(3000))")
        // Team A's two tokens (app and website) were revoked, each under its own client.
        #expect(setup.apple.revokedTokens.count == 3)
        #expect(try await setup.database.strings("""
            SELECT apple_team || ' ' || status || ' ' || (purged_at IS NOT NULL) FROM siwa.users WHERE apple_sub = '\(Self.shared)' ORDER BY 1
            """) == ["\(Self.teamA) deleted true", "\(Self.teamB) consent_revoked false"])
        // The erase took team A's user's sign-in codes out of the replay
        // cache (app and website), not team B's user's, same sub.
        #expect(try await setup.database.strings("""
            SELECT u.apple_team FROM siwa.sign_in_codes AS c JOIN siwa.users AS u ON u.id = c.user_id WHERE c.apple_sub = '\(Self.shared)'
            """) == [Self.teamB])
    }

    /// A secret signed with one team's key is refused for another team's
    /// client, as Apple refuses it: siwa signs each client's with its own.
    @Test func aClientsSecretIsItsOwnTeams() async throws {
        let keysA = try SignInFixture.files()
        defer { keysA.remove() }
        let apple = try AppleSimulator()
        keysA.register(with: apple)
        apple.assignClient(Self.acquired, toTeam: Self.teamB)
        let server = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await server.stop() }
        let key = try AppleClientSecretKey.load(p8Path: keysA.privateKeyFile, teamID: keysA.teamID, keyID: keysA.keyID)
        let wrong = AppleAuthClient(baseURL: server.baseURL, httpClient: .shared, secrets: try ClientSecretProvider(key: key))
        #expect(await wrong.revoke(token: "r.x", clientID: Self.acquired) == .invalidClient)
        #expect(await wrong.revoke(token: "r.x", clientID: Self.app) == .success)
        let perClient = AppleAuthClient(baseURL: server.baseURL, httpClient: .shared,
                                        secrets: try ClientSecretProvider(keys: [Self.app: key], anyClient: nil))
        #expect(await perClient.revoke(token: "r.x", clientID: Self.app) == .success)
        #expect(throws: AppleClientSecretError.self) { try perClient.secrets.secret(for: Self.acquired) }
    }
}
