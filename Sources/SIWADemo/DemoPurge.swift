import AccountStore
import AppleSimulator
import ChildProcesses
import Foundation
import Logging
import PostgresNIO
#if canImport(Glibc)
import Glibc
#endif

/// The demo's second half: a demo app table with the users' rows, a purge
/// plan that deletes them and tells a stand-in downstream service, and
/// `siwa worker` running that plan on the jobs the notifications enqueued.
struct DemoPurge {
    let demo: Demo

    func run(sub: String, client: PostgresClient) async throws {
        let logger = Logger(label: "demo", factory: { _ in SwiftLogNoOpLogHandler() })
        // The app's own table, made by the owner. The purge plan's SQL steps
        // run as the purge role (SET LOCAL ROLE), which owns nothing: it
        // needs these grants, as in production on the app's real tables;
        // serve's role never holds them.
        let purgeRole = demo.database.roles.purge
        let grants = [
            "CREATE SCHEMA demo_app",
            "CREATE TABLE demo_app.profiles (apple_sub text NOT NULL, display_name text)",
            "GRANT USAGE ON SCHEMA demo_app TO \(purgeRole)",
            "GRANT SELECT, DELETE ON demo_app.profiles TO \(purgeRole)",
        ]
        print("\nThe app's own table, and what the purge role may do to it (as \(demo.database.owner.username)):")
        for statement in grants {
            print("  \(statement);")
            try await client.query(PostgresQuery(unsafeSQL: statement), logger: logger)
        }
        let other = sub + ".b"
        try await client.query("""
            INSERT INTO demo_app.profiles (apple_sub, display_name)
            VALUES (\(sub), 'Demo User'), (\(other), 'Other User'), (\(sub + ".kept"), 'Bystander')
            """, logger: logger)

        let downstream = DownstreamStub()
        let downstreamServer = try await downstream.start(logger: logger)
        let planFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-demo-plan-\(getpid()).json").path
        let plan = """
            {"steps": [
              {"name": "demo-app", "sql": ["DELETE FROM demo_app.profiles WHERE apple_sub = $1"]},
              {"name": "notify-crm", "http": {"url": "\(downstreamServer.baseURL)/hooks/purge", "secret_env": "DEMO_CRM_SECRET"}}
            ]}
            """
        try plan.write(toFile: planFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: planFile) }
        print("\nPurge plan (\(planFile)):\n\(plan.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))")
        print("\nsiwa worker: running the purge jobs…")
        let worker = try demo.spawn("worker", environment: [
            "SIWA_DATABASE_URL": demo.database.workerURL, "SIWA_PURGE_ROLE": purgeRole, "SIWA_PURGE_PLAN": planFile,
            "DEMO_CRM_SECRET": downstream.secret,
            "SIWA_LOG_LEVEL": "warning",
        ])
        defer { if worker.isRunning { worker.signal(SIGTERM) } }
        try await Demo.waitForJobs(of: [sub, other], client: client)
        worker.signal(SIGTERM)
        _ = await worker.wait()

        try await Demo.printReports(Self.reports(sub: sub), client: client)
        print("\ndownstream service (stand-in): webhooks received")
        for delivery in downstream.deliveries where (delivery.fields["apple_sub"] as? String)?.hasPrefix(sub) == true {
            let body = String(decoding: delivery.body, as: UTF8.self)
            print("  webhook-id \(delivery.webhookID)  signature \(delivery.signatureValid ? "valid" : "INVALID")  \(body)")
        }
        await downstreamServer.stop()
    }

    static func reports(sub: String) -> [(String, String)] {
        let prefix = sub.replacingOccurrences(of: "'", with: "")
        return [
            ("siwa.jobs (after the worker)", """
                SELECT id::text, args->>'apple_sub' AS apple_sub, state, attempt::text,
                       (SELECT string_agg(key, ', ' ORDER BY value) FROM jsonb_each_text(steps_done)) AS steps_done
                FROM siwa.jobs WHERE args->>'apple_sub' LIKE '\(prefix)%' ORDER BY jobs.id
                """),
            ("siwa.users (tombstones: sub and status kept, email erased)", """
                SELECT id::text, apple_sub, status, (email IS NOT NULL)::text AS has_email
                FROM siwa.users WHERE apple_sub LIKE '\(prefix)%' ORDER BY users.id
                """),
            ("demo_app.profiles (the app's own table)", """
                SELECT apple_sub, display_name FROM demo_app.profiles WHERE apple_sub LIKE '\(prefix)%' ORDER BY apple_sub
                """),
            ("siwa.audit_log (worker)", """
                SELECT seq::text, actor, action, apple_sub, details->>'job_id' AS job_id, details->>'step' AS step
                FROM siwa.audit_log WHERE apple_sub LIKE '\(prefix)%' AND actor = 'worker' ORDER BY audit_log.seq
                """),
        ]
    }
}
