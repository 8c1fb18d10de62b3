import AppleSimulator
import ChildProcesses
import Foundation
import NIOHTTP1
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `siwa-example-backend` end to end, as docs/client.md has an app's
/// backend start: the real executable against siwa serve (in-process, sign-in
/// on), a real `siwa worker` delivering app events to it, and the Apple
/// simulator playing both Apple and the iOS app.
@Suite("Example backend", .testDatabases, .timeLimit(.minutes(10)))
struct ExampleBackendTests {
    /// The example as a child process, on a port of its own.
    final class Example: Sendable {
        let child: ChildProcess
        let baseURL: String
        let logFile: String

        init(port: Int, apiURL: String, apiKey: String, secret: String) throws {
            logFile = FileManager.default.temporaryDirectory.appendingPathComponent("example-\(UUID().uuidString).log").path
            baseURL = "http://127.0.0.1:\(port)"
            let environment = ProcessInfo.processInfo.environment.merging([
                "EXAMPLE_API_URL": apiURL, "EXAMPLE_API_KEY": apiKey, "EXAMPLE_WEBHOOK_SECRET": secret,
                "EXAMPLE_HOST": "127.0.0.1", "EXAMPLE_PORT": String(port),
            ]) { $1 }
            child = try ChildProcess(executable: try TestEnvironment.builtBinary("siwa-example-backend").path, arguments: [],
                                     environment: environment, outputFile: logFile)
        }

        var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

        func waitUntilUp() async throws {
            let up = try await eventually(upTo: .seconds(30)) {
                guard child.isRunning else { throw TestSetupError("the example exited: \(log.suffix(2000))") }
                return (try? await HTTPAnswer.send(method: .GET, url: baseURL + "/healthz", body: nil, headers: [], timeout: .seconds(2)))?.status == 200
            }
            if !up { throw TestSetupError("the example did not start: \(log.suffix(2000))") }
        }

        /// What the iOS app sends: Apple's credential.
        func signIn(_ credential: [String: Any]) async throws -> HTTPAnswer {
            try await HTTPAnswer.send(method: .POST, url: baseURL + "/auth/apple", body: try JSONSerialization.data(withJSONObject: credential),
                                      headers: [("Content-Type", "application/json")])
        }

        func me(_ session: String, method: HTTPMethod = .GET) async throws -> HTTPAnswer {
            try await HTTPAnswer.send(method: method, url: baseURL + "/me", body: nil, headers: [("Authorization", "Bearer \(session)")])
        }

        deinit {
            if child.isRunning { child.signal(SIGKILL) }
            try? FileManager.default.removeItem(atPath: logFile)
        }
    }

    @Test func signInSessionAndTheEventsThatEndIt() async throws {
        let port = try TestPorts.free()
        let secret = AppWebhookHarness.newSecret()
        let setup = try await AccountDeletionTests.Setup.start(worker: [
            "SIWA_APP_WEBHOOK_URL": "http://127.0.0.1:\(port)/siwa/events", "SIWA_APP_WEBHOOK_SECRET": secret,
        ])
        try atTestEnd { await setup.stop() }
        let example = try Example(port: port, apiURL: setup.signIn.server.apiURL, apiKey: setup.signIn.key, secret: secret)
        try await example.waitUntilUp()
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        try await worker.waitForLog("Worker started")
        let server = setup.signIn.server

        // The app signs in with Apple and posts the credential to its backend.
        func credential(_ sub: String) throws -> [String: Any] {
            try setup.signIn.appleSignIn(sub: sub, user: ["name": ["firstName": "Ada", "lastName": "Lovelace"]])
        }
        let signedIn = try await example.signIn(try credential("001.example.0001"))
        #expect(signedIn.status == 200 && signedIn.json["is_new_user"] as? Bool == true, "\(signedIn.text) \(example.log.suffix(2000))")
        let session = try #require(signedIn.json["session"] as? String)
        let me = try await example.me(session)
        #expect(me.status == 200 && me.json["apple_sub"] as? String == "001.example.0001", "\(me.text)")
        #expect(try await example.me("not-a-session").status == 401)
        #expect(try await setup.database.strings("SELECT given_name FROM siwa.users WHERE apple_sub = '001.example.0001'") == ["Ada"])
        // A credential siwa refuses (a code Apple has seen) is the app's to renew.
        var reused = try credential("001.example.0009")
        reused["authorization_code"] = "spent-code"
        #expect(try await example.signIn(reused).status == 401)

        // Apple tells siwa the user deleted their Apple Account: siwa's
        // worker tells the backend, which ends the session.
        #expect(try await server.post(token: try server.notification("account-delete", sub: "001.example.0001")).status == 200)
        #expect(try await eventually(upTo: .seconds(30)) { try await example.me(session).status == 401 },
                "\(example.log.suffix(2000)) \(worker.log.suffix(2000))")

        // Another user deletes their account in the app: the backend asks
        // siwa, which revokes and purges, and ends the session at once.
        let other = try await example.signIn(try credential("001.example.0002"))
        let otherSession = try #require(other.json["session"] as? String, "\(other.text)")
        let deleted = try await example.me(otherSession, method: .DELETE)
        #expect(deleted.status == 202, "\(deleted.text)")
        #expect(try await example.me(otherSession).status == 401)

        // Every event reached the backend verified and was answered 2xx:
        // the sign-ins, Apple's event, the deletion request, both purges.
        #expect(try await eventually(upTo: .seconds(60)) {
            try await setup.database.scalar("SELECT count(*) FROM siwa.jobs WHERE kind = 'app_event' AND state = 'completed'") >= 6
        }, "\(example.log.suffix(3000)) \(worker.log.suffix(3000))")
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.jobs WHERE kind = 'app_event' AND state <> 'completed'") == 0,
                "\(worker.log.suffix(3000))")
        let log = example.log
        let handled = log.split(separator: "\n").filter { $0.contains("app event handled") }
        for type in ["user.signed_in", "apple.account-delete", "user.deletion_requested", "purge.completed"] {
            #expect(handled.contains { $0.contains("type=\(type)") }, "\(type): \(log.suffix(3000))")
        }
        #expect(!log.contains("app event refused"), "\(log.suffix(3000))")
    }
}
