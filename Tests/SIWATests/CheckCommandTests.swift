import AppleSimulator
import Foundation
import Testing

/// `siwa check`, the exit statuses, plain words for a database that cannot
/// be reached, and the journal's priorities, from the real binary.
@Suite("siwa check and exit statuses", .testDatabases, .timeLimit(.minutes(5)))
struct CheckCommandTests {
    @Test func everyProblemIsReportedAtOnceWithTheUnknownNameFirst() async throws {
        let database = try await TestDatabase.create()
        let directory = try SecretFilesTests.directory()
        let urlFile = try SecretFilesTests.write(database.serveURL, to: directory, "database-url")
        let result = try await runSIWA(["check", "serve"], environment: [
            "SIWA_DATABASE_URL": database.serveURL,
            "SIWA_DATABASE_URL_FILE": urlFile,
            "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
            "SIWA_HTTP_PROT": "8080",
            "SIWA_INGEST_TIMEOUT_SECONDS": "forever",
            "SIWA_ON_CONSENT_REVOKED": "maybe",
            "SIWA_MAX_BODY_BYTES": "10",
            "SIWA_RECEIPT_JWKS_FILE": "/nonexistent/receipt-keys.json",
            // Two that only a component's own reader sees: a port that is
            // no number nor off, and sign-in set in part.
            "SIWA_ADMIN_HTTP_PORT": "eighty", "SIWA_API_HTTP_PORT": "eighty-two",
            "SIWA_APPLE_TEAM_ID": "ABCDE12345", "SIWA_APPLE_KEY_ID": "XYZ987WVU6",
        ])
        #expect(result.status == 2, "\(result.output)")
        let lines = result.output.split(separator: "\n").map(String.init)
        let expected = [
            "siwa: SIWA_HTTP_PROT is not a siwa setting (did you mean SIWA_HTTP_PORT?)",
            "siwa: SIWA_DATABASE_URL: is given 2 ways (SIWA_DATABASE_URL, SIWA_DATABASE_URL_FILE): keep one",
            "siwa: SIWA_MAX_BODY_BYTES: expected a whole number in 1024...1048576, got '10'",
            "siwa: SIWA_INGEST_TIMEOUT_SECONDS: expected a number of seconds in 0.1...120.0, got 'forever'",
            "siwa: SIWA_ON_CONSENT_REVOKED: expected one of purge, sign_out, got 'maybe'",
            "siwa: SIWA_RECEIPT_JWKS_FILE: /nonexistent/receipt-keys.json: no such file",
            "siwa: SIWA_ADMIN_HTTP_PORT: expected off or a whole number in 0...65535, got 'eighty'",
            "siwa: SIWA_API_HTTP_PORT: expected off or a whole number in 0...65535, got 'eighty-two'",
        ]
        for line in expected { #expect(lines.contains(line), "missing: \(line)\n\(result.output)") }
        #expect(lines.contains { $0.hasPrefix("siwa: SIWA_APPLE_PRIVATE_KEY_FILE: is required when SIWA_APPLE_KEY_ID is set") }, "\(result.output)")
        #expect(lines.first == expected[0], "\(result.output)")
        #expect(lines.last == "siwa: check serve: \(lines.count - 1) problems", "\(result.output)")
        // Each setting once, however many readers refused it.
        #expect(lines.filter { $0.hasPrefix("siwa: SIWA_DATABASE_URL:") }.count == 1, "\(result.output)")
        #expect(!result.output.contains(database.serveURL), "a secret printed back")
    }

    @Test func goodSettingsAgainstTheTestDatabasePass() async throws {
        let database = try await TestDatabase.create()
        let directory = try SecretFilesTests.directory()
        // The URL as the units give it: a credential.
        _ = try SecretFilesTests.write(database.serveURL + "\n", to: directory, "SIWA_DATABASE_URL")
        let serve = try await runSIWA(["check", "serve"], environment: [
            "CREDENTIALS_DIRECTORY": directory.path, "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
        ])
        #expect(serve.status == 0, "\(serve.output)")
        #expect(serve.output.contains("ok: schema: up to date"), "\(serve.output)")
        #expect(serve.output.contains("siwa check serve: no problem found"), "\(serve.output)")

        let worker = try await runSIWA(["check", "worker"], environment: ["SIWA_DATABASE_URL": database.workerURL])
        #expect(worker.status == 0, "\(worker.output)")
        #expect(worker.output.contains("ok: purge plan: no SIWA_PURGE_PLAN"), "\(worker.output)")
    }

    /// Nothing listens on the port: the one-shot commands stop with exit
    /// status 1 and say where and what, `siwa check` warns and passes
    /// (serve and worker wait for a database that is not up yet).
    @Test func anUnreachableDatabaseIsReportedInPlainWords() async throws {
        let port = try freePort()
        let url = "postgres://siwa_serve:secret@127.0.0.1:\(port)/siwa?sslmode=disable"
        let migrate = try await runSIWA(["migrate", "--check"], environment: ["SIWA_DATABASE_URL": url])
        #expect(migrate.status == 1, "\(migrate.output)")
        #expect(migrate.output.contains("siwa: SIWA_DATABASE_URL: postgres://siwa_serve@127.0.0.1:\(port)/siwa: cannot connect to 127.0.0.1:\(port): connection refused"),
                "\(migrate.output)")
        for word in ["PSQLError", "connectionError", "NIOConnectionError", "errno", "secret"] {
            #expect(!migrate.output.contains(word), "\(word) in: \(migrate.output)")
        }

        let check = try await runSIWA(["check", "serve"], environment: [
            "SIWA_DATABASE_URL": url, "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
        ])
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.contains("siwa: warning: SIWA_DATABASE_URL: postgres://siwa_serve@127.0.0.1:\(port)/siwa: cannot connect to 127.0.0.1:\(port): connection refused"),
                "\(check.output)")
    }

    @Test func theExitStatusesAreOneTable() async throws {
        let help = try await runSIWA(["--help"])
        #expect(help.status == 0)
        for line in ["Exit status (every command):", "  0   done", "  1   a runtime failure", "  2   configuration", "  64  usage"] {
            #expect(help.output.contains(line), "\(line) not in --help")
        }
        let usage = try await runSIWA(["serve", "--no-such-option"])
        #expect(usage.status == 64, "\(usage.output)")
        let subcommand = try await runSIWA(["no-such-command"])
        #expect(subcommand.status == 64, "\(subcommand.output)")
        let configuration = try await runSIWA(["serve"], environment: ["SIWA_HTTP_PORT": "99999"])
        #expect(configuration.status == 2, "\(configuration.output)")
        let check = try await runSIWA(["check", "postgres"])
        #expect(check.status == 64, "\(check.output)")
    }

    /// Start-up itself (not only the check) refuses a secret given two ways,
    /// naming every such setting, before anything else.
    @Test func startUpRefusesASecretGivenTwoWays() async throws {
        let directory = try SecretFilesTests.directory()
        let urlFile = try SecretFilesTests.write("postgres://u:p@127.0.0.1:1/x?sslmode=disable", to: directory, "url")
        let secretFile = try SecretFilesTests.write("whsec_" + Data(repeating: 1, count: 32).base64EncodedString(), to: directory, "secret")
        let worker = try await runSIWA(["worker"], environment: [
            "SIWA_DATABASE_URL": "postgres://u:p@127.0.0.1:1/x?sslmode=disable", "SIWA_DATABASE_URL_FILE": urlFile,
            "SIWA_APP_WEBHOOK_SECRET": "whsec_" + Data(repeating: 2, count: 32).base64EncodedString(),
            "SIWA_APP_WEBHOOK_SECRET_FILE": secretFile,
        ])
        #expect(worker.status == 2, "\(worker.output)")
        #expect(worker.output == """
            siwa: SIWA_APP_WEBHOOK_SECRET: is given 2 ways (SIWA_APP_WEBHOOK_SECRET, SIWA_APP_WEBHOOK_SECRET_FILE): keep one
            siwa: SIWA_DATABASE_URL: is given 2 ways (SIWA_DATABASE_URL, SIWA_DATABASE_URL_FILE): keep one

            """, "\(worker.output)")
    }

    /// Under systemd (stderr is the journal's stream) a start-up failure
    /// carries its syslog priority, so `journalctl -p warning` shows it.
    @Test func aFatalConfigurationErrorCarriesItsJournalPriority() async throws {
        let siwa = try SIWAProcess(environment: ["SIWA_DATABASE_URL": "postgres://u:p@127.0.0.1:1/x?sslmode=disable",
                                                 "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
                                                 "SIWA_HTTP_PROT": "1", "SIWA_HTTP_PORT": "99999"],
                                   journal: true)
        let status = await siwa.child.wait()
        #expect(status == 2, "\(siwa.log)")
        let lines = siwa.log.split(separator: "\n").map(String.init)
        #expect(lines.contains("<3>siwa: SIWA_HTTP_PORT: expected a whole number in 0...65535, got '99999'"), "\(siwa.log)")
        #expect(lines.contains("<4>siwa: warning: SIWA_HTTP_PROT is not a siwa setting (did you mean SIWA_HTTP_PORT?)")
                    || !lines.contains { $0.contains("SIWA_HTTP_PROT") }, "\(siwa.log)")
    }
}
