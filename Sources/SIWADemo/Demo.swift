import AccountStore
import AppleSimulator
import ChildProcesses
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import PostgresNIO
#if canImport(Glibc)
import Glibc
#endif

/// The demo's first half: the Apple simulator, `siwa migrate` (as the
/// owner), `siwa serve` (as the runtime role), one notification of each type
/// plus a duplicate and a forged one, and the rows they left.
struct Demo {
    /// The production `siwa` executable the demo runs.
    let siwa: String
    let database: DemoDatabase
    let port: Int
    /// The API listener's (`/v1`); 0: a free one.
    let apiPort: Int

    func run() async throws {
        let quiet = Logger(label: "demo", factory: { _ in SwiftLogNoOpLogHandler() })
        try await migrate()

        let apple = try AppleSimulator()
        let appleServer = try await apple.start(logger: quiet)
        let clientID = "com.example.siwa.demo"
        let (servePort, apiPort) = try listenerPorts()
        print("Apple simulator: \(appleServer.baseURL)/auth/keys (kids \(apple.keys.map(\.kid).joined(separator: ", ")))")

        let signIn = try DemoSignIn.Files(apple: apple, appleBaseURL: appleServer.baseURL)
        defer { signIn.remove() }
        let serve = try spawnServe(port: servePort, apiPort: apiPort, environment: [
            "SIWA_DATABASE_URL": database.serveURL,
            "SIWA_APPLE_JWKS_URL": "\(appleServer.baseURL)/auth/keys", "SIWA_LOG_LEVEL": "warning",
        ].merging(signIn.settings) { $1 }.merging(DemoSignIn.clientSettings(native: clientID)) { $1 })
        defer { if serve.isRunning { serve.signal(SIGTERM) } }
        let base = "http://127.0.0.1:\(servePort)", api = "http://127.0.0.1:\(apiPort)"
        try await Self.waitUntilReady(base, api: api)
        print("siwa serve: \(base), /v1 on \(api) (pid \(serve.pid))\n")

        let sub = "001234.demo\(Int(Date().timeIntervalSince1970)).0042"
        let now = Date()
        let emailOff = try apple.notification(type: "email-disabled", sub: sub, audience: clientID, eventTime: now.addingTimeInterval(-30),
                                              email: "demo@privaterelay.appleid.com", isPrivateEmail: true)
        let forger = try apple.unpublishedKey()
        let sends: [(String, String)] = [
            ("email-disabled", emailOff),
            ("email-enabled", try apple.notification(type: "email-enabled", sub: sub, audience: clientID, eventTime: now.addingTimeInterval(-20))),
            ("duplicate of email-disabled", emailOff),
            ("consent-revoked", try apple.notification(type: "consent-revoked", sub: sub, audience: clientID, eventTime: now.addingTimeInterval(-10))),
            ("account-delete", try apple.notification(type: "account-delete", sub: sub, audience: clientID, eventTime: now)),
            ("account-deleted (another user)", try apple.notification(type: "account-deleted", sub: sub + ".b", audience: clientID)),
            ("forged (key Apple never published)",
             try apple.signer.sign(header: ["kid": apple.currentKey.kid, "alg": "RS256"],
                                   claims: TokenSigner.notificationClaims(type: "account-deleted", sub: sub, audience: clientID),
                                   key: forger)),
        ]
        print("POST /apple/notifications")
        for (label, token) in sends {
            let (status, body) = try await Self.post(base + "/apple/notifications", body: AppleSimulator.body(for: token))
            print("  \(label.padding(toLength: 36, withPad: " ", startingAt: 0)) -> \(status) \(body)")
        }

        var owner = database.owner
        owner.maximumConnections = 2
        try await owner.withClient { client in
            try await Self.printReports(Self.reports(sub: sub), client: client)
            try await DemoPurge(demo: self).run(sub: sub, client: client)
            try await DemoSignIn(demo: self, files: signIn, apple: apple, api: api, clientID: clientID)
                .run(sub: sub + ".signin", client: client)
            try await DemoTransfer(demo: self, files: signIn, apple: apple, appleBaseURL: appleServer.baseURL, api: api,
                                   clientID: clientID)
                .run(prefix: sub + ".transfer", client: client)
        }
        await appleServer.stop()
        serve.signal(SIGTERM)
        _ = await serve.wait()
    }

    static func printReports(_ reports: [(String, String)], client: PostgresClient) async throws {
        for (title, sql) in reports {
            print("\n\(title)")
            print(try await TablePrinter.render(client: client, sql: sql))
        }
    }

    static func reports(sub: String) -> [(String, String)] {
        let prefix = sub.replacingOccurrences(of: "'", with: "")
        return [
            ("siwa.users", """
                SELECT id::text, apple_sub, status, email_forwarding_enabled::text AS forwarding, email_event_time::text,
                       (email IS NOT NULL)::text AS has_email
                FROM siwa.users WHERE apple_sub LIKE '\(prefix)%' ORDER BY users.id
                """),
            ("siwa.notifications", """
                SELECT id::text, left(jti, 8) || '…' AS jti, event_type, apple_sub, event_time::text
                FROM siwa.notifications WHERE apple_sub LIKE '\(prefix)%' ORDER BY notifications.id
                """),
            ("siwa.jobs", """
                SELECT id::text, kind, args->>'apple_sub' AS apple_sub, args->>'event_type' AS event_type, state, attempt::text
                FROM siwa.jobs WHERE args->>'apple_sub' LIKE '\(prefix)%' ORDER BY jobs.id
                """),
            ("siwa.audit_log", """
                SELECT seq::text, actor, action, apple_sub, details->>'event_type' AS event_type
                FROM siwa.audit_log WHERE apple_sub LIKE '\(prefix)%' ORDER BY audit_log.seq
                """),
            ("siwa.rejected_notifications (latest)", """
                SELECT id::text, reason, detail, left(body_sha256, 12) || '…' AS body_sha256, body_bytes::text
                FROM siwa.rejected_notifications ORDER BY rejected_notifications.id DESC LIMIT 3
                """),
        ]
    }

    static func post(_ url: String, body: Data) async throws -> (Int, String) {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(15))
        let bytes = try await response.body.collect(upTo: 64 * 1024)
        return (Int(response.status.code), String(buffer: bytes))
    }

    /// Until the jobs of these users are all completed (30 s at most).
    static func waitForJobs(of subs: [String], client: PostgresClient) async throws {
        let logger = Logger(label: "demo", factory: { _ in SwiftLogNoOpLogHandler() })
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let rows = try await client.query("""
                SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = ANY(\(subs)) AND state <> 'completed'
                """, logger: logger)
            var pending = 1
            for try await count in rows.decode(Int.self) { pending = count }
            if pending == 0 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Ready: `/readyz` on the public listener answers 200, and the API
    /// listener answers at all (`/v1` without a key: 401).
    static func waitUntilReady(_ base: String, api: String) async throws {
        for _ in 0..<200 {
            var ready = HTTPClientRequest(url: base + "/readyz")
            ready.method = .GET
            var v1 = HTTPClientRequest(url: api + "/v1/users/ready")
            v1.method = .GET
            if let response = try? await HTTPClient.shared.execute(ready, timeout: .seconds(2)), response.status == .ok,
               (try? await HTTPClient.shared.execute(v1, timeout: .seconds(2))) != nil {
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw DemoError("siwa serve did not become ready (its log is above)")
    }

    /// The public and API listeners' ports: the ones asked for, else free
    /// ones, never the same.
    func listenerPorts() throws -> (serve: Int, api: Int) {
        let serve = port == 0 ? try freeLoopbackPort() : port
        var api = apiPort == 0 ? try freeLoopbackPort() : apiPort
        while api == serve, apiPort == 0 { api = try freeLoopbackPort() }
        guard api != serve else { throw DemoError("--api-port: \(api) is siwa serve's --port too") }
        return (serve, api)
    }

    /// `siwa migrate` as the owner of the demo database, granting serve's
    /// and the worker's roles their privileges, as a production deploy runs it.
    func migrate() async throws {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-demo-migrate-\(getpid()).log").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let migrate = try spawn("migrate", environment: [
            "SIWA_MIGRATE_DATABASE_URL": database.ownerURL, "SIWA_SERVE_ROLE": database.roles.serve,
            "SIWA_WORKER_ROLE": database.roles.worker, "SIWA_LOG_LEVEL": "warning",
        ], outputFile: output)
        let status = await migrate.wait()
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        print("siwa migrate (as \(database.owner.username)):")
        print(text.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
        guard status == 0 else { throw DemoError("siwa migrate failed (exit status \(status))") }
    }

    /// `siwa serve` as a child process: the production binary, so the demo shows the real thing.
    /// `adminPort`: the admin listener's, on loopback; nil: off.
    func spawnServe(port: Int, apiPort: Int, adminPort: Int? = nil, metricsPort: Int = 0,
                    environment: [String: String]) throws -> ChildProcess {
        try spawn("serve", environment: environment.merging([
            "SIWA_HTTP_PORT": String(port), "SIWA_HTTP_HOST": "127.0.0.1",
            "SIWA_API_HTTP_PORT": String(apiPort), "SIWA_API_HTTP_HOST": "127.0.0.1",
            // The demo must not collide with a siwa already on 8081 or 8083:
            // no admin listener unless asked, the metrics listener on any
            // free port (logged) unless given one.
            "SIWA_ADMIN_HTTP_PORT": adminPort.map(String.init) ?? "off", "SIWA_ADMIN_HTTP_HOST": "127.0.0.1",
            "SIWA_METRICS_HTTP_PORT": String(metricsPort), "SIWA_METRICS_HTTP_HOST": "127.0.0.1",
        ]) { $1 })
    }

    /// `siwa command`, its logs on our stderr unless `outputFile` says otherwise.
    /// The demo's own settings (SIWA_DEMO_*) and any SIWA_* of the caller's
    /// environment stay out: the child sees only what the demo gives it.
    func spawn(_ command: String, arguments: [String] = [], environment: [String: String],
               outputFile: String = "/dev/stderr") throws -> ChildProcess {
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SIWA_") }
        // The demo's workers must not collide with a siwa worker already on 9091 (nor with each other).
        if command == "worker" {
            env["SIWA_WORKER_METRICS_PORT"] = "off"
            // The demo's erasure ledger is throwaway, as its database is.
            env["SIWA_ERASURE_LEDGER_DIR"] = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-demo-erasures").path
        }
        env.merge(environment) { $1 }
        return try ChildProcess(executable: siwa, arguments: [command] + arguments, environment: env, outputFile: outputFile)
    }
}

struct DemoError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Prints query results as an aligned text table. Every column of the
/// query must be text (the reports cast them).
enum TablePrinter {
    static func render(client: PostgresClient, sql: String) async throws -> String {
        var columns: [String] = []
        var rows: [[String]] = []
        for try await row in try await client.query(PostgresQuery(unsafeSQL: sql)) {
            if columns.isEmpty { columns = row.map(\.columnName) }
            rows.append(try row.map { try $0.decode(String?.self) ?? "∅" })
        }
        if rows.isEmpty { return "  (no rows)" }
        let widths = columns.indices.map { i in max(columns[i].count, rows.map { $0[i].count }.max() ?? 0) }
        func line(_ cells: [String]) -> String {
            "  " + zip(cells, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: " | ")
        }
        return ([line(columns), "  " + widths.map { String(repeating: "-", count: $0) }.joined(separator: "-+-")]
                + rows.map(line)).joined(separator: "\n")
    }
}
