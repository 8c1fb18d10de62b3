import AccountStore
import AppleSimulator
import ArgumentParser
import ChildProcesses
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import PostgresNIO
import SIWAServer
#if canImport(Glibc)
import Glibc
#endif

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show siwa working end to end against a simulated Apple, on this machine.",
        discussion: """
            Starts the Apple simulator (its own RSA keys and JWKS endpoint on loopback), runs \
            `siwa serve` against SIWA_DATABASE_URL (migrated), sends one notification of each \
            type plus a duplicate and a forged one, prints each answer and the resulting rows. \
            Then runs `siwa worker` with a demo purge plan (delete rows from a demo app table, \
            notify a stand-in downstream service with a signed webhook) and prints the purges. \
            `make demo` does all of it on a throwaway PostgreSQL.
            """
    )

    @Option(help: "Port for siwa serve (default: a free one).")
    var port: Int = 0

    func run() async throws {
        let env = Environment()
        let databaseURL = Startup.settings { try env.required("SIWA_DATABASE_URL", example: "postgres://siwa:siwa@127.0.0.1:5432/siwa") }
        let quiet = Logger(label: "demo", factory: { _ in SwiftLogNoOpLogHandler() })

        let apple = try AppleSimulator()
        let appleServer = try await apple.start(logger: quiet)
        let clientID = "com.example.siwa.demo"
        let servePort = port == 0 ? try freeLoopbackPort() : port
        print("Apple simulator: \(appleServer.baseURL)/auth/keys (kids \(apple.keys.map(\.kid).joined(separator: ", ")))")

        let serve = try Self.spawnServe(port: servePort, environment: [
            "SIWA_DATABASE_URL": databaseURL, "SIWA_APPLE_CLIENT_IDS": clientID,
            "SIWA_APPLE_JWKS_URL": "\(appleServer.baseURL)/auth/keys", "SIWA_LOG_LEVEL": "warning",
        ])
        defer { if serve.isRunning { serve.signal(SIGTERM) } }
        let base = "http://127.0.0.1:\(servePort)"
        try await Self.waitUntilReady(base)
        print("siwa serve: \(base) (pid \(serve.pid))\n")

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

        let database = Startup.settings { try DatabaseConfiguration(url: databaseURL, maximumConnections: 2) }
        try await database.withClient { client in
            try await Self.printReports(Self.reports(sub: sub), client: client)
            try await DemoPurge.run(sub: sub, databaseURL: databaseURL, client: client, serveLog: quiet)
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
                FROM siwa.users WHERE apple_sub LIKE '\(prefix)%' ORDER BY id
                """),
            ("siwa.notifications", """
                SELECT id::text, left(jti, 8) || '…' AS jti, event_type, apple_sub, event_time::text
                FROM siwa.notifications WHERE apple_sub LIKE '\(prefix)%' ORDER BY id
                """),
            ("siwa.jobs", """
                SELECT id::text, kind, args->>'apple_sub' AS apple_sub, args->>'event_type' AS event_type, state, attempt::text
                FROM siwa.jobs WHERE args->>'apple_sub' LIKE '\(prefix)%' ORDER BY id
                """),
            ("siwa.audit_log", """
                SELECT seq::text, actor, action, apple_sub, details->>'event_type' AS event_type
                FROM siwa.audit_log WHERE apple_sub LIKE '\(prefix)%' ORDER BY seq
                """),
            ("siwa.rejected_notifications (latest)", """
                SELECT id::text, reason, detail, left(body_sha256, 12) || '…' AS body_sha256, body_bytes::text
                FROM siwa.rejected_notifications ORDER BY id DESC LIMIT 3
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

    static func waitUntilReady(_ base: String) async throws {
        for _ in 0..<200 {
            var request = HTTPClientRequest(url: base + "/readyz")
            request.method = .GET
            if let response = try? await HTTPClient.shared.execute(request, timeout: .seconds(2)), response.status == .ok { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Startup.fail("siwa serve did not become ready (is the database migrated?)", code: 1)
    }

    /// `siwa serve` as a child process: the same binary, so the demo shows the real thing.
    static func spawnServe(port: Int, environment: [String: String]) throws -> ChildProcess {
        try spawn("serve", environment: environment.merging(["SIWA_HTTP_PORT": String(port), "SIWA_HTTP_HOST": "127.0.0.1"]) { $1 })
    }

    /// This binary with `command`, its logs on our stderr.
    static func spawn(_ command: String, environment: [String: String]) throws -> ChildProcess {
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
        return try ChildProcess(executable: executable, arguments: [command], environment: env, outputFile: "/dev/stderr")
    }
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
