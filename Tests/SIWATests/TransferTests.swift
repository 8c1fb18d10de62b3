import AccountStore
import AppleSignIn
import AppleSimulator
import Foundation
import NIOHTTP1
import SIWAConfiguration
import SIWAClient
import Testing

/// App transfer between teams (issue 21 §2, TN3159), end to end: `siwa
/// transfer` as an admin's role, real `siwa worker` processes calling the
/// simulated Apple's `/auth/usermigrationinfo`, the settings switched from
/// the sending team to the receiving one, and sign-ins over HTTP.
@Suite("App transfer", .testDatabases, .timeLimit(.minutes(10)))
struct TransferTests {
    static let teamA = "TEAM123456"
    static let teamB = "TEAMB98765"

    /// Two teams' keys (the same token key ring: the stored tokens move
    /// with the database), both registered with the simulator; serve and
    /// worker start with team A's settings.
    struct Setup: Sendable {
        let deletion: AccountDeletionTests.Setup
        let teamB: SimulatedTeamKeyFiles
        let adminURL: String
        var apple: AppleSimulator { deletion.apple }
        var database: TestDatabase { deletion.database }
        var worker: WorkerHarness { deletion.worker }

        static func start(worker extra: [String: String] = [:]) async throws -> Setup {
            let deletion = try await AccountDeletionTests.Setup.start(worker: extra)
            let ring = try String(contentsOfFile: deletion.signIn.fixture.keyRingFile, encoding: .utf8)
                .split(separator: "\n").map(String.init)
            let teamB = try SimulatedTeamKeyFiles(teamID: TransferTests.teamB, keyID: "KEYB987654", keyRing: ring, label: "team-b")
            teamB.register(with: deletion.apple)
            let adminURL = try await APIKeysTests.loginURL(AdminFunctionsTests.admin, in: "siwa_admin", for: deletion.database)
            return Setup(deletion: deletion, teamB: teamB, adminURL: adminURL)
        }

        func stop() async {
            await deletion.stop()
            teamB.remove()
        }

        /// `siwa transfer ARGUMENTS` as the admin, with `team`'s id and the test client.
        func transfer(_ arguments: [String], team: String = TransferTests.teamA) async throws -> ProcessResult {
            try await runSIWA(["transfer"] + arguments, environment: [
                "SIWA_DATABASE_URL": adminURL, "SIWA_APPLE_TEAM_ID": team, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
                "SUDO_USER": "alice",
            ])
        }

        /// Team B's settings for a worker (the same database and simulator).
        var teamBSettings: [String: String] {
            SignInFixture.settings(teamB, appleBaseURL: deletion.signIn.server.appleServer.baseURL)
        }

        /// `count` users of team A made as the inbox and sign-in would
        /// leave them (a sub, an address, names), each with the address
        /// the simulated Apple knows: every second one Hide My Email.
        func users(_ count: Int, prefix: String) async throws -> [String] {
            let subs = (0..<count).map { String(format: "001.\(prefix).%04d", $0) }
            try await database.execute("""
                INSERT INTO siwa.users (apple_sub, apple_team, email, is_private_email, given_name, family_name)
                SELECT s, '\(TransferTests.teamA)', CASE WHEN n % 2 = 0 THEN 'r' || n || '@privaterelay.appleid.com' ELSE 'person' || n || '@example.com' END,
                       n % 2 = 0, 'Given ' || n, 'Family ' || n
                FROM unnest(ARRAY[\(subs.map { "'\($0)'" }.joined(separator: ","))]) WITH ORDINALITY AS u(s, n)
                """)
            for (index, sub) in subs.enumerated() {
                let n = index + 1
                apple.setUserEmail(n % 2 == 0 ? "r\(n)@privaterelay.appleid.com" : "person\(n)@example.com", sub: sub, team: TransferTests.teamA)
            }
            return subs
        }

        func count(_ condition: String) async throws -> Int {
            try await database.scalar("SELECT count(*) FROM siwa.users WHERE \(condition)")
        }
    }

    /// The issue's test: 1,000 users moved from one simulated team to
    /// another (prepare, switch the settings, complete), one of them
    /// signing in mid-way; every account arrives once, with its id and data.
    @Test func aThousandUsersMoveToAnotherTeamOnceEachWithTheirData() async throws {
        let setup = try await Setup.start(worker: ["SIWA_APPLE_REQUESTS_PER_SECOND": "0", "SIWA_WORKER_CONCURRENCY": "8"])
        try atTestEnd { await setup.stop() }
        let subs = try await setup.users(1000, prefix: "tr")
        let before = try await setup.database.strings("""
            SELECT id || '|' || apple_sub || '|' || email || '|' || given_name || '|' || family_name FROM siwa.users ORDER BY id
            """)

        // The sending team: a transfer_sub for every user.
        let workerA = try setup.worker.startWorker()
        try atTestEnd { await workerA.kill9() }
        let prepared = try await setup.transfer(["prepare", "--to", Self.teamB])
        #expect(prepared.status == 0 && prepared.output.contains("1000 users enqueued"), "\(prepared.output)")
        #expect(try await setup.worker.wait(upTo: .seconds(240)) {
            try await setup.count("transfer_phase = 'prepare' AND transfer_state = 'done'") == 1000
        }, "\(workerA.log.suffix(3000))")
        for sub in subs.prefix(3) {
            #expect(try await setup.database.strings("SELECT transfer_sub FROM siwa.users WHERE apple_sub = '\(sub)'")
                    == [AppleSimulator.transferSub(of: sub, from: Self.teamA, to: Self.teamB)])
        }
        let status = try await setup.transfer(["status"])
        #expect(status.status == 0 && status.output.contains("prepare") && status.output.contains("1000"), "\(status.output)")
        // A rerun asks Apple nothing more: every user is done.
        let calls = setup.apple.userMigrationRequests
        let again = try await setup.transfer(["prepare", "--to", Self.teamB])
        #expect(again.status == 0 && again.output.contains("0 users enqueued"), "\(again.output)")
        #expect(await workerA.terminate() == 0)

        // The app moves; the operator switches the settings to team B.
        setup.apple.transferApp(from: Self.teamA, to: Self.teamB)
        let workerB = try setup.worker.startWorker(setup.teamBSettings.merging(["SIWA_APPLE_REQUESTS_PER_SECOND": "0"]) { $1 })
        try atTestEnd { await workerB.kill9() }
        let serveB = try await ServerHarness.start(database: setup.database, signIn: setup.teamB, simulator: setup.apple)
        try atTestEnd { await serveB.stop() }

        // One user signs in before the exchange: the token's transfer_sub
        // links the account on the spot, same id, new sub.
        let early = subs[41]
        let signIn = try setup.apple.transferredSignIn(sub: early, from: Self.teamA, to: Self.teamB, clientID: ServerHarness.clientID)
        let client = try SIWAClient.forTests(apiURL: serveB.apiURL, key: setup.deletion.signIn.key)
        let answer = try await client.signIn(json: signIn.signInBody)
        let earlyNew = AppleSimulator.transferredSub(of: early, from: Self.teamA, to: Self.teamB)
        let earlyID = try await setup.database.scalar("SELECT id FROM siwa.users WHERE given_name = 'Given 42'")
        #expect(answer.status == 200 && answer.value?.appleSub == earlyNew, "\(answer.text)")
        #expect(answer.value.map { Int($0.userId) } == earlyID && answer.value?.isNewUser == false, "\(answer.text)")

        let completed = try await setup.transfer(["complete"], team: Self.teamB)
        #expect(completed.status == 0 && completed.output.contains("999 users enqueued"), "\(completed.output)")
        #expect(try await setup.worker.wait(upTo: .seconds(240)) {
            try await setup.count("transfer_phase = 'complete' AND transfer_state = 'done'") == 1000
        }, "\(workerB.log.suffix(3000))")

        // Every account once: the same ids, names and real addresses; the
        // new sub Apple gave; a new relay address for Hide My Email users.
        #expect(try await setup.count("true") == 1000)
        let after = try await setup.database.strings("""
            SELECT id || '|' || apple_sub || '|' || email || '|' || given_name || '|' || family_name FROM siwa.users ORDER BY id
            """)
        #expect(after.count == before.count)
        for (old, new) in zip(before, after) {
            let o = old.split(separator: "|").map(String.init), n = new.split(separator: "|").map(String.init)
            #expect(o[0] == n[0] && o[3] == n[3] && o[4] == n[4], "\(old) -> \(new)")
            #expect(n[1] == AppleSimulator.transferredSub(of: o[1], from: Self.teamA, to: Self.teamB), "\(old) -> \(new)")
            let relay = o[2].hasSuffix("@privaterelay.appleid.com")
            #expect(n[2] == (relay ? AppleSimulator.transferredRelayEmail(of: o[1], from: Self.teamA, to: Self.teamB) : o[2]),
                    "\(old) -> \(new)")
        }
        // Each move audited once (old and new sub, no address, no name);
        // the early user by its sign-in, the others by their jobs.
        #expect(try await setup.database.scalar("""
            SELECT count(DISTINCT details->>'user_id') FROM siwa.audit_log WHERE action = 'user.transferred'
            """) == 1000)
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'user.transferred'") == 1000)
        #expect(try await setup.database.strings("""
            SELECT actor || ' ' || (details->>'via') FROM siwa.audit_log WHERE action = 'user.transferred' AND apple_sub = '\(earlyNew)'
            """) == ["api sign_in"])
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'user.transferred'
              AND (details::text LIKE '%@%' OR details::text LIKE '%Given%')
            """) == 0)
        // One exchange per user not linked by the sign-in; the access token reused.
        #expect(setup.apple.userMigrationRequests - calls == 999, "\(setup.apple.userMigrationRequests - calls)")
        #expect(setup.apple.migrationTokensIssued <= 4, "\(setup.apple.migrationTokensIssued)")

        // The old sub answers where the user went, for the 60 days.
        let moved = try await client.lookup(subs[0])
        guard case .moved(let movedUser) = moved.value else {
            Issue.record("the old sub is not answered as moved: \(moved.text)")
            return
        }
        #expect(movedUser.movedTo == AppleSimulator.transferredSub(of: subs[0], from: Self.teamA, to: Self.teamB), "\(moved.text)")
        try await setup.database.execute("UPDATE siwa.user_moves SET moved_at = now() - interval '61 days' WHERE old_sub = '\(subs[0])'")
        let expired = try await client.lookup(subs[0])
        #expect(expired.value == .notFound, "\(expired.text)")
        let final = try await setup.transfer(["status"], team: Self.teamB)
        #expect(final.output.contains("complete") && final.output.contains("done") && final.output.contains("1000"), "\(final.output)")
    }

    /// Each move reaches the app's backend as a `user.transferred` event:
    /// the new sub as `sub`, the old one as `previous_sub`, the same user id.
    @Test func eachMoveIsAnAppEvent() async throws {
        let webhook = try await AppWebhookHarness.start()
        let setup = try await Setup.start(worker: webhook.settings().merging(["SIWA_APPLE_REQUESTS_PER_SECOND": "0"]) { $1 })
        try atTestEnd { await setup.stop() }
        let subs = try await setup.users(3, prefix: "ev")
        let ids = try await setup.database.strings("SELECT id::text FROM siwa.users ORDER BY id")
        let workerA = try setup.worker.startWorker()
        try atTestEnd { await workerA.kill9() }
        #expect(try await setup.transfer(["prepare", "--to", Self.teamB]).status == 0)
        #expect(try await setup.worker.wait { try await setup.count("transfer_state = 'done'") == 3 }, "\(workerA.log.suffix(2000))")
        #expect(await workerA.terminate() == 0)
        setup.apple.transferApp(from: Self.teamA, to: Self.teamB)
        let workerB = try setup.worker.startWorker(setup.teamBSettings)
        try atTestEnd { await workerB.kill9() }
        #expect(try await setup.transfer(["complete"], team: Self.teamB).status == 0)
        #expect(try await setup.worker.wait {
            webhook.receiver.deliveries.filter { $0.type == "user.transferred" && (200..<300).contains($0.status) }.count == 3
        }, "\(workerB.log.suffix(2000))")
        let events = webhook.receiver.deliveries.filter { $0.type == "user.transferred" }
        for (sub, id) in zip(subs, ids) {
            let new = AppleSimulator.transferredSub(of: sub, from: Self.teamA, to: Self.teamB)
            let event = try #require(events.first { $0.sub == new }, "no event for \(sub)")
            #expect(event.data["previous_sub"] as? String == sub && "\(event.data["user_id"] ?? "")" == id, "\(event.data)")
            #expect(event.data["team"] as? String == Self.teamB && event.data["via"] as? String == "usermigrationinfo")
            #expect(!String(decoding: event.body, as: UTF8.self).contains("@"), "no address in the event")
        }
    }

    /// What an operator gets wrong is refused in one line, writing nothing;
    /// Apple's refusals show in `status`; an export holds ids and
    /// transfer_subs only; a worker killed mid-prepare loses nothing.
    @Test func refusalsApplesAnswersAnExportAndAKilledWorker() async throws {
        let setup = try await Setup.start(worker: ["SIWA_APPLE_REQUESTS_PER_SECOND": "15"])
        try atTestEnd { await setup.stop() }
        let subs = try await setup.users(40, prefix: "rf")
        let audits = try await setup.database.scalar("SELECT count(*) FROM siwa.audit_log")

        let refusals: [([String], String)] = [
            (["prepare", "--to", "team-b"], "siwa: --to: expected a team id, 10 upper-case letters and digits"),
            (["prepare", "--to", Self.teamA], "siwa: --to \(Self.teamA) is the team the app is in (SIWA_APPLE_TEAM_ID)"),
            (["prepare", "--to", Self.teamB, "--client-id", "com.other.app"], "siwa: --client-id: 'com.other.app' is not one of"),
            (["export", "/tmp/siwa-transfer-never-\(UUID().uuidString)"], "siwa: nothing is prepared: run siwa transfer prepare --to TEAM_ID first"),
            (["complete"], "siwa: no user awaits a transfer to team \(Self.teamA)"),
        ]
        for (arguments, message) in refusals {
            let result = try await setup.transfer(arguments)
            #expect(result.status == 1 && result.output.contains(message), "\(arguments): \(result.output)")
            #expect(result.output.split(separator: "\n").filter { !$0.hasPrefix("siwa: warning:") }.count == 1, "one line: \(result.output)")
        }
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.audit_log") == audits, "a refusal writes nothing")
        #expect(try await setup.count("transfer_phase IS NOT NULL") == 0)

        // Apple refuses one user for good, and is down for a moment.
        setup.apple.refuseUserMigration(of: subs[5], error: "invalid_request")
        setup.apple.setUserMigrationBehaviour(.status(503))
        let workerA = try setup.worker.startWorker()
        let started = try await setup.transfer(["prepare", "--to", Self.teamB])
        #expect(started.status == 0, "\(started.output)")
        #expect(try await setup.worker.wait(upTo: .seconds(30)) {
            try await setup.count("transfer_reason LIKE 'unavailable (status 503%' AND transfer_state = 'pending'") > 0
        }, "\(workerA.log.suffix(2000))")
        setup.apple.setUserMigrationBehaviour(.normal)
        // Killed mid-way (kill -9), then restarted: every user ends done
        // or failed, none is lost, none asked twice after its answer.
        #expect(try await setup.worker.wait(upTo: .seconds(30)) {
            try await setup.count("transfer_state = 'done'") >= 5
        })
        await workerA.kill9()
        let doneAtKill = try await setup.count("transfer_state = 'done'")
        #expect(doneAtKill < 39, "killed mid-way: \(doneAtKill) done")
        let restarted = try setup.worker.startWorker()
        try atTestEnd { await restarted.kill9() }
        #expect(try await setup.worker.wait(upTo: .seconds(90)) {
            try await setup.count("transfer_phase = 'prepare' AND transfer_state IN ('done', 'failed')") == 40
        }, "\(restarted.log.suffix(3000))")
        #expect(try await setup.count("transfer_state = 'done'") == 39)
        let failed = try await setup.database.strings("SELECT apple_sub || ' ' || transfer_reason FROM siwa.users WHERE transfer_state = 'failed'")
        #expect(failed == ["\(subs[5]) rejected (status 400, invalid_request)"], "\(failed)")
        for sub in subs where sub != subs[5] {
            #expect(try await setup.database.strings("SELECT transfer_sub FROM siwa.users WHERE apple_sub = '\(sub)'")
                    == [AppleSimulator.transferSub(of: sub, from: Self.teamA, to: Self.teamB)])
        }
        let status = try await setup.transfer(["status"])
        #expect(status.output.contains("failed") && status.output.contains("rejected (status 400, invalid_request)"), "\(status.output)")
        // The pacer held through it all: at most the cap (15/s) on the whole
        // (arrival times, read in this busy test process, bunch up by some
        // milliseconds now and then: the rate, not each gap, is the check).
        let times = setup.apple.userMigrationRequestTimes
        let span = try #require(times.last) - (try #require(times.first))
        let rate = Double(times.count - 1) / (Double(span.components.seconds) + Double(span.components.attoseconds) / 1e18)
        #expect(times.count >= 40 && rate <= 15 * 1.2, "\(times.count) calls in \(span): \(rate)/s")

        // The export: refused with a failure, then without it; ids and transfer_subs only.
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-export-\(UUID().uuidString).jsonl").path
        try atTestEnd { try? FileManager.default.removeItem(atPath: file) }
        let refused = try await setup.transfer(["export", file])
        #expect(refused.status == 1 && refused.output.contains("1 users failed"), "\(refused.output)")
        let exported = try await setup.transfer(["export", file, "--skip-failed"])
        #expect(exported.status == 0 && exported.output.contains("39 users written"), "\(exported.output)")
        let text = try String(contentsOfFile: file, encoding: .utf8)
        #expect(text.hasPrefix(#"{"siwa_transfer_export":1,"target_team":"\#(Self.teamB)","users":39}"#), "\(text.prefix(200))")
        #expect(!text.contains("001.rf.") && !text.contains("@") && !text.contains("Given"), "no sub, no address, no name")
        #expect(text.split(separator: "\n").count == 40)
        let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        // A buyer with a siwa of their own imports it, and completes there.
        let buyer = try await TestDatabase.create()
        let buyerAdmin = try await APIKeysTests.loginURL(AdminFunctionsTests.admin, in: "siwa_admin", for: buyer)
        let buyerEnv = ["SIWA_DATABASE_URL": buyerAdmin, "SIWA_APPLE_TEAM_ID": Self.teamB, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID]
        let wrongTeam = try await runSIWA(["transfer", "import", file], environment: buyerEnv.merging(["SIWA_APPLE_TEAM_ID": "OTHER12345"]) { $1 })
        #expect(wrongTeam.status == 1 && wrongTeam.output.contains("was prepared for team \(Self.teamB)"), "\(wrongTeam.output)")
        let imported = try await runSIWA(["transfer", "import", file], environment: buyerEnv)
        #expect(imported.status == 0 && imported.output.contains("39 users imported"), "\(imported.output)")
        let twice = try await runSIWA(["transfer", "import", file], environment: buyerEnv)
        #expect(twice.status == 1 && twice.output.contains("exists in this siwa already"), "\(twice.output)")
        setup.apple.transferApp(from: Self.teamA, to: Self.teamB)
        let buyerWorker = try setup.worker.startWorker(setup.teamBSettings.merging([
            "SIWA_DATABASE_URL": buyer.workerURL, "SIWA_PURGE_PLAN": "", "SIWA_APPLE_REQUESTS_PER_SECOND": "0",
        ]) { $1 })
        try atTestEnd { await buyerWorker.kill9() }
        let buyerComplete = try await runSIWA(["transfer", "complete"], environment: buyerEnv)
        #expect(buyerComplete.status == 0 && buyerComplete.output.contains("39 users enqueued"), "\(buyerComplete.output)")
        #expect(try await eventually(upTo: .seconds(60)) {
            try await buyer.scalar("SELECT count(*) FROM siwa.users WHERE transfer_state = 'done' AND apple_sub IS NOT NULL") == 39
        }, "\(buyerWorker.log.suffix(3000))")
        // The seller's ids, the receiving team's subs; a new user gets an id above them.
        let sellerIDs = try await setup.database.strings("""
            SELECT id || ' ' || apple_sub FROM siwa.users WHERE transfer_state = 'done' ORDER BY id
            """)
        let buyerRows = try await buyer.strings("SELECT id || ' ' || apple_sub FROM siwa.users ORDER BY id")
        #expect(buyerRows == sellerIDs.map { row in
            let parts = row.split(separator: " ")
            return "\(parts[0]) \(AppleSimulator.transferredSub(of: String(parts[1]), from: Self.teamA, to: Self.teamB))"
        })
        #expect(try await buyer.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'user.transferred' AND (details->>'imported')::boolean
            """) == 39)
        #expect(try await buyer.scalar("SELECT count(*) FROM siwa.user_moves") == 0, "no old sub to answer for")
    }

    /// Who may do what (sql/023): an admin starts and reads a transfer only
    /// through its functions; the worker moves users only through
    /// siwa.complete_user_transfer, serve only through a sign-in's link,
    /// and each is refused the other's door (the production roles).
    @Test func eachRoleHasOnlyItsOwnDoor() async throws {
        let database = try await TestDatabase.create()
        let (_, admin) = try await AdminFunctionsTests.adminConfiguration(database)
        let serve = try database.serveConfiguration
        let worker = try database.workerConfiguration
        let start = "SELECT * FROM siwa.start_transfer_prepare('\(Self.teamB)', '\(Self.teamA)', 'com.example.app', NULL)"
        let complete = "SELECT siwa.complete_user_transfer(1, 't', '\(Self.teamB)', 'new.sub', NULL, NULL)"
        let link = "SELECT siwa.link_transferred_sign_in('t', 'new.sub', '\(Self.teamB)')"
        let move = "SELECT siwa.move_transferred_user_as('admin', 'x', 1, 't', '\(Self.teamB)', 'new.sub', NULL, NULL)"
        let cases: [(String, String, DatabaseConfiguration, String?)] = [
            ("admin starts", start, admin, nil),
            ("admin reads the status", "SELECT * FROM siwa.transfer_status()", admin, nil),
            ("admin reads the moves", "SELECT * FROM siwa.user_moves", admin, nil),
            ("admin writes no user", "UPDATE siwa.users SET transfer_state = 'done'", admin, "42501"),
            ("admin moves nobody itself", move, admin, "42501"),
            ("admin completes no user", complete, admin, "42501"),
            ("the worker completes", complete, worker, nil),
            ("the worker links no sign-in", link, worker, "42501"),
            ("the worker starts nothing", start, worker, "42501"),
            ("serve links a sign-in", link, serve, nil),
            ("serve reads the moves", "SELECT * FROM siwa.user_moves", serve, nil),
            ("serve completes no user", complete, serve, "42501"),
            ("serve starts nothing", start, serve, "42501"),
            ("serve writes no move", "INSERT INTO siwa.user_moves (old_sub, new_sub, user_id) VALUES ('a', 'b', 1)", serve, "42501"),
            ("the worker writes no move", "INSERT INTO siwa.user_moves (old_sub, new_sub, user_id) VALUES ('a', 'b', 1)", worker, "42501"),
            ("a bad team is refused", "SELECT * FROM siwa.start_transfer_prepare('nope', '\(Self.teamA)', 'c', NULL)", admin, "22023"),
            ("the same team is refused", "SELECT * FROM siwa.start_transfer_prepare('\(Self.teamA)', '\(Self.teamA)', 'c', NULL)", admin, "22023"),
        ]
        for (what, statement, configuration, expected) in cases {
            #expect(try await AdminFunctionsTests.sqlState(of: statement, on: configuration) == expected, "\(what): \(statement)")
        }
    }

    /// The client and the simulator together, without a database: one
    /// access token for many calls, a new one after Apple refuses it, and
    /// Apple's answers sorted into final and retryable.
    @Test func theClientKeepsOneAccessTokenAndSortsApplesAnswers() async throws {
        let apple = try AppleSimulator()
        let server = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await server.stop() }
        let files = try SignInFixture.files()
        try atTestEnd { files.remove() }
        files.register(with: apple)
        guard let signIn = try SignInSettings.read(SettingsReader(SignInFixture.settings(files, appleBaseURL: server.baseURL))) else {
            throw TestSetupError("no sign-in settings")
        }
        let access = try AppleAccess(signIn)
        try atTestEnd { try? await access.httpClient.shutdown() }
        let migration = AppleUserMigration(client: access.apple)
        let client = ServerHarness.clientID

        for n in 0..<5 {
            let outcome = await migration.transferSub(of: "001.cl.\(n)", target: Self.teamB, clientID: client)
            #expect(outcome == .success(AppleSimulator.transferSub(of: "001.cl.\(n)", from: Self.teamA, to: Self.teamB)), "\(outcome)")
        }
        #expect(apple.migrationTokensIssued == 1)
        #expect(apple.lastTokenForm?["grant_type"] == "client_credentials" && apple.lastTokenForm?["scope"] == "user.migration")
        // An access token Apple no longer takes: refused once, then a new one.
        apple.expireMigrationTokens()
        #expect(await migration.transferSub(of: "001.cl.9", target: Self.teamB, clientID: client) == .invalidClient)
        #expect(await migration.transferSub(of: "001.cl.9", target: Self.teamB, clientID: client)
                == .success(AppleSimulator.transferSub(of: "001.cl.9", from: Self.teamA, to: Self.teamB)))
        #expect(apple.migrationTokensIssued == 2)

        // A transfer_sub made for another team than the caller's is refused, for good.
        let transferSub = AppleSimulator.transferSub(of: "001.cl.0", from: Self.teamA, to: Self.teamB)
        let early = await migration.exchange(transferSub: transferSub, clientID: client)
        #expect(early == .rejected(status: 400, error: "invalid_grant") || early == .invalidGrant, "\(early)")
        #expect(!early.isRetryable)
        apple.setUserMigrationBehaviour(.status(429, retryAfter: "7"))
        let busy = await migration.transferSub(of: "001.cl.1", target: Self.teamB, clientID: client)
        #expect(busy.isRetryable && busy == .unavailable(retryAfter: .seconds(7), reason: "status 429"), "\(busy)")
        apple.setUserMigrationBehaviour(.status(500))
        #expect(await migration.transferSub(of: "001.cl.1", target: Self.teamB, clientID: client).isRetryable)
        apple.setUserMigrationBehaviour(.normal)
        apple.refuseUserMigration(of: "001.cl.2", error: "invalid_request")
        let refused = await migration.transferSub(of: "001.cl.2", target: Self.teamB, clientID: client)
        #expect(refused == .rejected(status: 400, error: "invalid_request") && !refused.isRetryable)
        #expect(refused.description == "rejected (status 400, invalid_request)")
        // The sending side's form, as Apple documents it.
        #expect(apple.lastUserMigrationForm?["target"] == Self.teamB && apple.lastUserMigrationForm?["sub"] == "001.cl.2")
        #expect(apple.lastUserMigrationForm?["client_id"] == client && apple.lastUserMigrationForm?["client_secret"] != nil)
    }
}
