import AccountStore
import AppleSimulator
import ChildProcesses
import Foundation
import Logging
import UnixSignals
#if canImport(Glibc)
import Glibc
#endif

/// `siwa-demo --serve` (`make try`): siwa serve with sign-in on, siwa
/// worker, and the Apple simulator, left running so a person can play the
/// app's backend with curl; stops (and drops the demo database) on Ctrl-C.
struct DemoServe {
    let demo: Demo
    /// The admin listener's port (0: a free one), with an admin key; nil: off.
    var adminPort: Int?
    /// Where to write the listeners' URLs and the keys once all is ready
    /// (`make fuzz-api` reads it), as shell assignments.
    var envFile: String?
    /// More settings for serve (`--serve-setting`), last.
    var serveSettings: [String: String] = [:]
    /// Where the worker delivers the app events (`--app-webhook-url`); nil:
    /// the example backend.
    var appWebhookURL: String?

    func run() async throws {
        let quiet = Logger(label: "demo", factory: { _ in SwiftLogNoOpLogHandler() })
        try await demo.migrate()
        let apple = try AppleSimulator()
        let appleServer = try await apple.start(logger: quiet)
        let clientID = "com.example.siwa.demo"
        let (webClientID, returnURL) = (DemoSignIn.webClientID, DemoSignIn.returnURL)
        let (port, apiPort) = try demo.listenerPorts()
        let files = try DemoSignIn.Files(apple: apple, appleBaseURL: appleServer.baseURL)
        defer { files.remove() }
        // Apple tells siwa of each revocation, as in production.
        let base = "http://127.0.0.1:\(port)", api = "http://127.0.0.1:\(apiPort)"
        apple.setNotificationEndpoint(URL(string: base + "/apple/notifications"))
        let shared = ["SIWA_LOG_LEVEL": "notice"].merging(files.settings) { $1 }
        let admin = try adminPort.map { $0 == 0 ? try freeLoopbackPort() : $0 }
        var metricsPort = try freeLoopbackPort()
        while [port, apiPort, admin].contains(metricsPort) { metricsPort = try freeLoopbackPort() }
        let serve = try demo.spawnServe(port: port, apiPort: apiPort, adminPort: admin, metricsPort: metricsPort,
                                        environment: shared.merging([
            "SIWA_DATABASE_URL": demo.database.serveURL,
            "SIWA_APPLE_JWKS_URL": "\(appleServer.baseURL)/auth/keys",
        ].merging(DemoSignIn.clientSettings(native: clientID)) { $1 }) { $1 }.merging(serveSettings) { $1 })
        defer { if serve.isRunning { serve.signal(SIGTERM) } }
        try await Demo.waitUntilReady(base, api: api)
        // The example backend (siwa-example-backend, docs/client.md), built
        // beside siwa: the worker sends it the app events.
        let examplePort = try freeLoopbackPort()
        let exampleURL = "http://127.0.0.1:\(examplePort)"
        let webhookSecret = "whsec_" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let worker = try demo.spawn("worker", environment: shared.merging([
            "SIWA_DATABASE_URL": demo.database.workerURL,
            "SIWA_APP_WEBHOOK_URL": appWebhookURL ?? exampleURL + "/siwa/events", "SIWA_APP_WEBHOOK_SECRET": webhookSecret,
        ]) { $1 })
        defer { if worker.isRunning { worker.signal(SIGTERM) } }
        let key = try await demo.createAPIKey(named: "demo-backend")
        let example = try ChildProcess(
            executable: URL(fileURLWithPath: demo.siwa).deletingLastPathComponent().appendingPathComponent("siwa-example-backend").path,
            arguments: [], environment: [
                "EXAMPLE_API_URL": api, "EXAMPLE_API_KEY": key, "EXAMPLE_WEBHOOK_SECRET": webhookSecret,
                "EXAMPLE_HOST": "127.0.0.1", "EXAMPLE_PORT": String(examplePort),
            ], outputFile: "/dev/stderr")
        defer { if example.isRunning { example.signal(SIGTERM) } }
        var adminKey: String?
        if admin != nil { adminKey = try await demo.createAPIKey(named: "demo-admin", scope: "admin") }
        if let envFile {
            try writeEnvironment(to: envFile, [
                "SIWA_PUBLIC_URL": base, "SIWA_API_URL": api, "SIWA_METRICS_URL": "http://127.0.0.1:\(metricsPort)", "SIWA_ADMIN_URL": admin.map { "http://127.0.0.1:\($0)" } ?? "",
                "SIWA_APP_KEY": key, "SIWA_ADMIN_KEY": adminKey ?? "", "APPLE_URL": appleServer.baseURL,
                "SIWA_CLIENT_ID": clientID, "SIWA_DEMO_DATABASE": demo.database.name, "SIWA_APP_WEBHOOK_SECRET": webhookSecret,
            ])
        }

        print("""

            siwa is running with sign-in on, against a simulated Apple: Apple's notifications
            and health on \(base), the app backend's /v1 on its own listener. In another shell:

              export SIWA=\(api) APPLE=\(appleServer.baseURL) KEY=\(key) EXAMPLE=\(exampleURL)

              # What Apple hands the app at sign-in (the simulator's own endpoint):
              curl -s -X POST "$APPLE/simulator/authorize?sub=001.curl.0001&client_id=\(clientID)&email=me@privaterelay.appleid.com" > apple.json
              # The app's backend signs the user in:
              curl -s -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d @apple.json "$SIWA/v1/sign-in"
              curl -s -H "Authorization: Bearer $KEY" "$SIWA/v1/users/001.curl.0001"
              # The same on the web (Sign in with Apple JS, response_type=code): no identity
              # token, the code is bound to the redirect URI; siwa exchanges it at Apple's
              # /auth/token and verifies the id_token of Apple's answer:
              curl -s -X POST "$APPLE/simulator/authorize?sub=001.curl.0002&client_id=\(webClientID)&response_type=code&redirect_uri=\(returnURL)" > web.json
              curl -s -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d @web.json "$SIWA/v1/sign-in"
              # Without its redirect_uri, refused before Apple is called (redirect_uri_required):
              curl -s -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \\
                -d '{"authorization_code": "c1", "client_id": "\(webClientID)"}' "$SIWA/v1/sign-in"
              # The user deletes their account in the app:
              curl -s -X DELETE -H "Authorization: Bearer $KEY" "$SIWA/v1/users/001.curl.0001"
              curl -s -H "Authorization: Bearer $KEY" "$SIWA/v1/users/001.curl.0001"   # purge completed
              # An app's own backend on SIWAClient (siwa-example-backend, docs/client.md): the
              # app posts Apple's credential to it, it signs the user in through siwa and
              # answers its own session; siwa's app events reach it (logged here):
              curl -s -X POST "$APPLE/simulator/authorize?sub=001.curl.0003&client_id=\(clientID)" > app.json
              curl -s -H 'Content-Type: application/json' -d @app.json "$EXAMPLE/auth/apple"   # {"session": ...}
              curl -s -H "Authorization: Bearer SESSION" "$EXAMPLE/me"
              curl -s -X DELETE -H "Authorization: Bearer SESSION" "$EXAMPLE/me"   # the in-app deletion

            Ctrl-C stops everything and drops the demo database.
            """)
        if let admin, let adminKey {
            print("""

                The admin listener: http://127.0.0.1:\(admin)/admin (the admin key as the password of Basic, any user name)
                  export ADMIN_KEY=\(adminKey)
                  curl -s -H "Authorization: Bearer $ADMIN_KEY" 'http://127.0.0.1:\(admin)/admin/summary?days=7'
                """)
        }
        // Out now, also into a pipe or a file (stdout is block-buffered there).
        fflush(nil)
        let signals = await UnixSignalsSequence(trapping: [.sigint, .sigterm])
        for await _ in signals { break }
        print("\nStopping…")
        example.signal(SIGTERM)
        worker.signal(SIGTERM)
        serve.signal(SIGTERM)
        _ = await example.wait()
        _ = await worker.wait()
        _ = await serve.wait()
        await appleServer.stop()
    }

    /// `NAME='VALUE'` lines, written to a temporary file and renamed into
    /// place, so a reader that waits for the file never reads half of it.
    private func writeEnvironment(to path: String, _ values: [String: String]) throws {
        let text = values.sorted { $0.key < $1.key }
            .map { "\($0.key)='\($0.value.replacingOccurrences(of: "'", with: #"'\''"#))'" }.joined(separator: "\n") + "\n"
        let temporary = path + ".partial"
        try text.write(toFile: temporary, atomically: false, encoding: .utf8)
        guard rename(temporary, path) == 0 else { throw DemoError("cannot write \(path)") }
    }
}
