import AccountStore
import AppleSimulator
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
#if canImport(Glibc)
import Glibc
#endif

/// The demo's last part, an app transfer between teams (TN3159,
/// docs/app-transfer.md): three users sign in on the sending team; `siwa
/// transfer prepare` has the worker ask the simulated Apple for their
/// transfer_sub; the app moves; the worker restarts with the receiving
/// team's key; `siwa transfer complete` moves each user to their new sub,
/// keeping their id; the old sub answers `moved_to`.
struct DemoTransfer {
    let demo: Demo
    let files: DemoSignIn.Files
    let apple: AppleSimulator
    let appleBaseURL: String
    /// The API listener (`/v1`).
    let api: String
    let clientID: String

    static let receivingTeam = "DEMOTEAM02"

    func run(prefix: String, client: PostgresClient) async throws {
        print("\n— App transfer to another team (prepare, switch the settings, complete) —")
        let sendingTeam = files.keys.teamID
        let key = try await demo.createAPIKey(named: "demo-transfer")
        let subs = (1...3).map { "\(prefix).\($0)" }
        for (n, sub) in subs.enumerated() {
            // Two of them use Hide My Email: the receiving team gets new relay addresses for them.
            let email = n == 2 ? "shared\(n)@example.com" : "hidden\(n)@privaterelay.appleid.com"
            apple.setUserEmail(email, sub: sub, team: sendingTeam)
            let signIn = try apple.signIn(sub: sub, clientID: clientID, email: email)
            _ = try await Demo.send(.POST, api + "/v1/sign-in", key: key, body: try JSONSerialization.data(withJSONObject: signIn.signInBody))
        }
        print("Three users signed in on team \(sendingTeam): \(subs.joined(separator: ", ")) (every user siwa holds moves with the app)")
        let ids = try await Self.ids(of: subs, client: client)

        let workerA = try demo.spawn("worker", environment: [
            "SIWA_DATABASE_URL": demo.database.workerURL, "SIWA_LOG_LEVEL": "warning",
        ].merging(files.settings) { $1 })
        defer { if workerA.isRunning { workerA.signal(SIGTERM) } }
        print("\nsiwa transfer prepare --to \(Self.receivingTeam)   (the sending team's settings)")
        print(try await transfer(["prepare", "--to", Self.receivingTeam], team: sendingTeam))
        try await Self.wait(for: ids, phase: "prepare", client: client)
        print("siwa transfer status")
        print(try await transfer(["status"], team: sendingTeam))
        workerA.signal(SIGTERM)
        _ = await workerA.wait()

        // The app moves in App Store Connect; siwa's settings become the receiving team's.
        apple.transferApp(from: sendingTeam, to: Self.receivingTeam)
        let ring = try String(contentsOfFile: files.keys.keyRingFile, encoding: .utf8).split(separator: "\n").map(String.init)
        let teamB = try SimulatedTeamKeyFiles(teamID: Self.receivingTeam, keyID: "DEMOKEY002", keyRing: ring, label: "demo-team-b")
        defer { teamB.remove() }
        teamB.register(with: apple)
        print("\nThe app moves to team \(Self.receivingTeam); the worker restarts with that team's key (SIWA_APPLE_TEAM_ID, SIWA_APPLE_KEY_ID, SIWA_APPLE_PRIVATE_KEY_FILE).")
        let workerB = try demo.spawn("worker", environment: [
            "SIWA_DATABASE_URL": demo.database.workerURL, "SIWA_LOG_LEVEL": "warning",
        ].merging(teamB.settings(appleBaseURL: appleBaseURL)) { $1 })
        defer { if workerB.isRunning { workerB.signal(SIGTERM) } }
        print("siwa transfer complete   (the receiving team's settings)")
        print(try await transfer(["complete"], team: Self.receivingTeam))
        try await Self.wait(for: ids, phase: "complete", client: client)
        print("siwa transfer status")
        print(try await transfer(["status"], team: Self.receivingTeam))
        workerB.signal(SIGTERM)
        _ = await workerB.wait()

        print("\ncurl -H 'Authorization: Bearer $KEY' \(api)/v1/users/\(subs[0])   (the old sub)")
        print("  -> \(try await Demo.send(.GET, api + "/v1/users/\(subs[0])", key: key))")
        try await Demo.printReports([
            ("siwa.users (the same ids, new subs; new relay addresses for Hide My Email)", """
                SELECT id::text, apple_sub, email, transfer_phase || ' ' || transfer_state AS transfer
                FROM siwa.users WHERE id = ANY(ARRAY[\(ids.map(String.init).joined(separator: ","))]::bigint[]) ORDER BY users.id
                """),
            ("siwa.audit_log (user.transferred: old and new sub, no email)", """
                SELECT seq::text, actor, action, details->>'old_sub' AS old_sub, details->>'new_sub' AS new_sub, details->>'via' AS via
                FROM siwa.audit_log WHERE action = 'user.transferred' ORDER BY seq
                """),
        ], client: client)
    }

    /// `siwa transfer ARGUMENTS` as the owner (an admin would use their own
    /// role), with `team` as the configured team; its output, indented.
    private func transfer(_ arguments: [String], team: String) async throws -> String {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-demo-transfer-\(getpid()).log").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let command = try demo.spawn("transfer", arguments: arguments, environment: [
            "SIWA_DATABASE_URL": demo.database.ownerURL, "SIWA_APPLE_TEAM_ID": team, "SIWA_APPLE_CLIENT_IDS": clientID,
            "SIWA_LOG_LEVEL": "warning",
        ], outputFile: output)
        let status = await command.wait()
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        guard status == 0 else { throw DemoError("siwa transfer \(arguments.joined(separator: " ")) failed (exit status \(status)): \(text)") }
        return text.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n")
    }



    static func ids(of subs: [String], client: PostgresClient) async throws -> [Int64] {
        var ids: [Int64] = []
        for try await id in try await client.query("SELECT id FROM siwa.users WHERE apple_sub = ANY(\(subs)) ORDER BY id").decode(Int64.self) {
            ids.append(id)
        }
        guard ids.count == subs.count else { throw DemoError("the users did not sign in (\(ids.count) of \(subs.count) found)") }
        return ids
    }

    /// Until the users are done in `phase` (30 s at most).
    static func wait(for ids: [Int64], phase: String, client: PostgresClient) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            var done = 0
            let rows = try await client.query("""
                SELECT count(*) FROM siwa.users WHERE id = ANY(\(ids)) AND transfer_phase = \(phase) AND transfer_state = 'done'
                """)
            for try await count in rows.decode(Int.self) { done = count }
            if done == ids.count { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw DemoError("the transfer's \(phase) step did not finish within 30 s")
    }
}
