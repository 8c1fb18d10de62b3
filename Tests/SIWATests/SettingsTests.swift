import AccountStore
import Foundation
import SIWAConfiguration
import SIWAServer
import SIWAWorker
import Testing

/// One declaration per setting (SettingsCatalog): the docs agree with it,
/// values are bounded with one-line errors, and a misspelt name is reported.
@Suite("Settings")
struct SettingsTests {
    static func file(_ path: String) throws -> String {
        try String(contentsOf: TestEnvironment.repositoryRoot.appendingPathComponent(path), encoding: .utf8)
    }

    @Test func theDocsTableIsTheCatalogs() throws {
        let page = try Self.file("docs/settings.md")
        let start = try #require(page.range(of: "<!-- settings table: `siwa settings --markdown` -->\n"))
        let end = try #require(page.range(of: "\n<!-- end of settings table -->"))
        #expect(String(page[start.upperBound..<end.lowerBound]) == SettingsDocs.markdownTable(),
                "docs/settings.md's settings table is stale: replace it with `siwa settings --markdown`")
    }

    /// The deploy env files are `siwa settings --env-file`'s output, byte
    /// for byte.
    @Test(arguments: Setting.EnvFile.allCases)
    func theDeployEnvFilesAreGenerated(_ file: Setting.EnvFile) throws {
        let name = file.rawValue
        #expect(try Self.file("deploy/\(name).example") == SettingsDocs.envFile(file),
                "deploy/\(name) is stale: regenerate it with `siwa settings --env-file \(name) > deploy/\(name).example`")
    }

    /// Every setting is in a file; siwa.env, which serve and worker both
    /// read, holds no secret (the serve unit must not hold the worker's);
    /// the files name no setting that does not exist.
    @Test func theDeployEnvFilesPlaceEverySetting() {
        let files = Dictionary(uniqueKeysWithValues: Setting.EnvFile.allCases.map { ($0, SettingsDocs.envFile($0)) })
        func sets(_ file: Setting.EnvFile, _ setting: Setting) -> Bool {
            files[file]!.split(separator: "\n").contains { $0.hasPrefix(setting.name + "=") || $0.hasPrefix("#" + setting.name + "=") }
        }
        for setting in SettingsCatalog.all {
            #expect(Setting.EnvFile.allCases.contains { sets($0, setting) }, "\(setting.name) is in no deploy env file")
            #expect(!(setting.secret && sets(.shared, setting)),
                    "\(setting.name) is a secret: it belongs in the env file of the unit that uses it, not in siwa.env")
        }
        let known = Set(SettingsCatalog.all.map(\.name)).union(SettingsCatalog.fileVariables)
        for (file, text) in files {
            let named = Set(text.matches(of: /SIWA_[A-Z_]+[A-Z]/).map { String($0.output) })
            #expect(named.subtracting(known).isEmpty, "\(file.rawValue) names settings siwa does not have: \(named.subtracting(known).sorted())")
        }
    }

    @Test func defaultsBoundsAndOneLineErrors() throws {
        let base = ["SIWA_DATABASE_URL": "postgres://u@h/d", "SIWA_APPLE_CLIENT_IDS": "a, b,,", "SIWA_APPLE_TEAM_ID": "ABCDE12345"]
        let settings = try ServerSettings(environment: SettingsReader(base))
        #expect(settings.http.port == 8080 && settings.inbox.lanes == 1 && settings.clients.audiences == ["a", "b"]
                && settings.clients.team(of: "b") == "ABCDE12345")
        #expect(settings.events.onConsentRevoked == .purge && settings.events.consentRevokedPurgeDelaySeconds == 30 * 86400
                && settings.signInRequires == .code && settings.jobMaxRunSeconds == 900)
        #expect(try ServerSettings(environment: SettingsReader(base.merging(["SIWA_JOB_LEASE_SECONDS": "1200"]) { $1 }))
                    .jobMaxRunSeconds == 1200)
        let cases: [(String, String, String)] = [
            ("SIWA_HTTP_PORT", "70000", "SIWA_HTTP_PORT: expected a whole number in 0...65535, got '70000'"),
            ("SIWA_INGEST_TIMEOUT_SECONDS", "nan", "SIWA_INGEST_TIMEOUT_SECONDS: expected a number of seconds in 0.1...120.0, got 'nan'"),
            ("SIWA_ON_CONSENT_REVOKED", "delete", "SIWA_ON_CONSENT_REVOKED: expected one of purge, sign_out, got 'delete'"),
            ("SIWA_APPLE_JWKS_URL", "ftp://x", "SIWA_APPLE_JWKS_URL: expected an http(s) URL, got 'ftp://x'"),
            ("SIWA_APPLE_CLIENT_IDS", " , ", "SIWA_APPLE_CLIENT_IDS: lists nothing"),
            ("SIWA_APPLE_TEAM_ID", " ",
             "SIWA_APPLE_TEAM_ID: is required: the team of SIWA_APPLE_CLIENT_IDS (siwa keys users by team and sub; several teams: SIWA_APPLE_CLIENTS_FILE)"),
            ("SIWA_APPLE_CLIENTS_FILE", "/etc/siwa/clients.json",
             "SIWA_APPLE_TEAM_ID: set it in SIWA_APPLE_CLIENTS_FILE instead: with the clients file set, SIWA_APPLE_TEAM_ID, SIWA_APPLE_CLIENT_IDS, SIWA_APPLE_WEB_CLIENT_IDS, SIWA_APPLE_KEY_ID, SIWA_APPLE_PRIVATE_KEY_FILE must be unset"),
        ]
        for (name, value, message) in cases {
            #expect(throws: (any Error).self) { try ServerSettings(environment: SettingsReader(base.merging([name: value]) { $1 })) }
            do {
                _ = try ServerSettings(environment: SettingsReader(base.merging([name: value]) { $1 }))
            } catch {
                #expect("\(error)" == message)
            }
        }
        #expect(throws: (any Error).self) { try WorkerSettings(environment: SettingsReader(["SIWA_JOB_RETENTION_DAYS": "1"])) }
        let worker = try WorkerSettings(environment: SettingsReader(["SIWA_DATABASE_URL": "postgres://u@h/d", "SIWA_WORKER_CONCURRENCY": "10"]))
        #expect(worker.database.maxConnections == 14)
    }

    /// Each component reads its own settings: whichever value reads one,
    /// a malformed value of every bounded setting a process reads still
    /// stops its start-up with one line naming that setting.
    @Test func everyBoundedSettingOfServeAndWorkerIsRefusedByName() throws {
        let signIn = ["SIWA_APPLE_TEAM_ID": "ABCDE12345", "SIWA_APPLE_KEY_ID": "XYZ987WVU6",
                      "SIWA_APPLE_PRIVATE_KEY_FILE": "/k.p8", "SIWA_TOKEN_ENCRYPTION_KEYS_FILE": "/ring"]
        let serve = signIn.merging(["SIWA_DATABASE_URL": "postgres://u@h/d", "SIWA_APPLE_CLIENT_IDS": "a"]) { $1 }
        let worker = signIn.merging(["SIWA_DATABASE_URL": "postgres://u@h/d", "SIWA_APP_WEBHOOK_URL": "https://app.internal/x",
                                     "SIWA_APP_WEBHOOK_SECRET": AppWebhookHarness.newSecret()]) { $1 }
        #expect(throws: Never.self) { try ServerSettings(environment: SettingsReader(serve)) }
        #expect(throws: Never.self) { try WorkerSettings(environment: SettingsReader(worker)) }
        func bad(_ setting: Setting) -> String? {
            switch setting.kind {
            case .integer, .seconds, .days: "x"
            case .choice: "nope"
            case .url: "ftp://x"
            default: nil
            }
        }
        let checks: [(Setting.Reader, [String: String], (SettingsReader) throws -> Void)] = [
            (.serve, serve, { _ = try ServerSettings(environment: $0) }),
            (.worker, worker, { _ = try WorkerSettings(environment: $0) }),
        ]
        for (process, base, read) in checks {
            for setting in SettingsCatalog.all where setting.readers.contains(process) {
                guard let value = bad(setting) else { continue }
                do {
                    try read(SettingsReader(base.merging([setting.name: value]) { $1 }))
                    Issue.record("\(process): \(setting.name)=\(value) was accepted")
                } catch let error as SettingError {
                    #expect(error.name == setting.name, "\(process): \(setting.name)=\(value): \(error)")
                }
            }
        }
    }

    @Test func unknownNamesAreReportedWithTheClosestSetting() async throws {
        let reader = SettingsReader(["SIWA_HTTP_PROT": "1", "SIWA_DATABASE_URL": "x", "SIWA_TEST_DATABASE_URL": "y",
                                     "SIWA_COMPLETELY_ELSE": "z", "CRM_SECRET": "s", "SIWA_CRM_SECRET": "s"])
        #expect(reader.unknownNames(also: ["SIWA_CRM_SECRET"]) == [
            "SIWA_COMPLETELY_ELSE is not a siwa setting",
            "SIWA_HTTP_PROT is not a siwa setting (did you mean SIWA_HTTP_PORT?)",
        ])
        // As siwa reports it at start-up (siwa jobs stops later, on the unreachable database).
        let result = try await runSIWA(["jobs", "list"], environment: [
            "SIWA_DATABASE_URL": "postgres://u@127.0.0.1:9/x?sslmode=disable", "SIWA_LOG_LEVL": "debug",
        ])
        #expect(result.output.contains("siwa: warning: SIWA_LOG_LEVL is not a siwa setting (did you mean SIWA_LOG_LEVEL?)"),
                "\(result.output)")
    }

    @Test func helpListsEachCommandsSettings() async throws {
        let serve = try await runSIWA(["serve", "--help"])
        for setting in SettingsCatalog.all where setting.readers.contains(.serve) {
            #expect(serve.output.contains(setting.name), "serve --help lacks \(setting.name)")
        }
        #expect(!serve.output.contains("SIWA_PURGE_PLAN"))
        let worker = try await runSIWA(["worker", "--help"])
        #expect(worker.output.contains("SIWA_PURGE_PLAN") && worker.output.contains("SIWA_JOB_MAX_RUN_SECONDS"))
    }

    /// The admin listener: on by default, on loopback port 8081; `off`
    /// turns it off; anything else is one line naming the setting.
    @Test func theAdminListenerIsOnLoopbackByDefaultAndOffWithOff() throws {
        let base = ["SIWA_DATABASE_URL": "postgres://u@h/d", "SIWA_APPLE_CLIENT_IDS": "a", "SIWA_APPLE_TEAM_ID": "ABCDE12345"]
        let admin = try #require(try ServerSettings(environment: SettingsReader(base)).admin)
        #expect(admin.host == "127.0.0.1" && admin.port == 8081 && admin.authFailuresPerMinute == 10)
        for off in ["off", "OFF", " off "] {
            #expect(try ServerSettings(environment: SettingsReader(base.merging(["SIWA_ADMIN_HTTP_PORT": off]) { $1 })).admin == nil)
        }
        #expect(try ServerSettings(environment: SettingsReader(base.merging(["SIWA_ADMIN_HTTP_PORT": "0"]) { $1 })).admin?.port == 0)
        for bad in ["eighty", "70000", "-1", "no"] {
            #expect {
                try ServerSettings(environment: SettingsReader(base.merging(["SIWA_ADMIN_HTTP_PORT": bad]) { $1 }))
            } throws: { error in
                "\(error)" == "SIWA_ADMIN_HTTP_PORT: expected off or a whole number in 0...65535, got '\(bad)'"
            }
        }
    }

    /// The API listener (`/v1`): on loopback port 8082 by default; `off`
    /// turns it off; anything else is one line naming the setting. With
    /// sign-in on (the only time it is bound), a port another of serve's
    /// listeners takes on the same address is refused in one line, before
    /// anything binds. The metrics listener likewise, on 8083.
    @Test func theAPIAndMetricsListenersAreOnLoopbackByDefaultWithPortsOfTheirOwn() throws {
        let base = ["SIWA_DATABASE_URL": "postgres://u@h/d", "SIWA_APPLE_CLIENT_IDS": "a", "SIWA_APPLE_TEAM_ID": "ABCDE12345"]
        func read(_ base: [String: String], _ extra: [String: String]) throws -> ServerSettings {
            try ServerSettings(environment: SettingsReader(base.merging(extra) { $1 }))
        }
        let api = try #require(try read(base, [:]).api)
        #expect(api.host == "127.0.0.1" && api.port == 8082)
        for off in ["off", "OFF", " off "] { #expect(try read(base, ["SIWA_API_HTTP_PORT": off]).api == nil) }
        #expect(try read(base, ["SIWA_API_HTTP_PORT": "0"]).api?.port == 0)
        for bad in ["eighty", "70000", "-1"] {
            #expect { try read(base, ["SIWA_API_HTTP_PORT": bad]) } throws: { error in
                "\(error)" == "SIWA_API_HTTP_PORT: expected off or a whole number in 0...65535, got '\(bad)'"
            }
        }
        // Sign-in off: nothing binds the port, so it collides with nothing.
        #expect(try read(base, ["SIWA_API_HTTP_PORT": "8080"]).api?.port == 8080)

        let files = try SignInFixture.files()
        defer { files.remove() }
        let signIn = base.merging(SignInFixture.settings(files, appleBaseURL: "http://127.0.0.1:9")) { $1 }
        #expect(try read(signIn, [:]).signIn != nil)
        let collisions: [([String: String], String)] = [
            (["SIWA_API_HTTP_PORT": "8080"], "SIWA_HTTP_PORT"),
            (["SIWA_API_HTTP_PORT": "8081"], "SIWA_ADMIN_HTTP_PORT"),
            (["SIWA_API_HTTP_PORT": "9000", "SIWA_HTTP_PORT": "9000", "SIWA_HTTP_HOST": "0.0.0.0"], "SIWA_HTTP_PORT"),
        ]
        for (extra, other) in collisions {
            #expect { try read(signIn, extra) } throws: { error in
                "\(error)" == "SIWA_API_HTTP_PORT: \(extra["SIWA_API_HTTP_PORT"] ?? "") is \(other) too, on the same address: each listener needs a port of its own"
            }
        }
        // The metrics listener's port, against every other listener's.
        let metricsCollisions: [([String: String], String)] = [
            (["SIWA_METRICS_HTTP_PORT": "8080"], "SIWA_HTTP_PORT"),
            (["SIWA_METRICS_HTTP_PORT": "8081"], "SIWA_ADMIN_HTTP_PORT"),
            (["SIWA_METRICS_HTTP_PORT": "8082"], "SIWA_API_HTTP_PORT"),
        ]
        for (extra, other) in metricsCollisions {
            #expect { try read(signIn, extra) } throws: { error in
                "\(error)" == "SIWA_METRICS_HTTP_PORT: \(extra["SIWA_METRICS_HTTP_PORT"] ?? "") is \(other) too, on the same address: each listener needs a port of its own"
            }
        }
        let metrics = try #require(try read(signIn, [:]).metrics)
        #expect(metrics.host == "127.0.0.1" && metrics.port == 8083)
        #expect(try read(signIn, ["SIWA_METRICS_HTTP_PORT": "off"]).metrics == nil)
        #expect(try read(signIn, ["SIWA_METRICS_HTTP_PORT": "8082", "SIWA_API_HTTP_PORT": "off"]).metrics?.port == 8082)
        // Another address, any free port (0), or the other listener off: no collision.
        #expect(try read(signIn, ["SIWA_API_HTTP_PORT": "8080", "SIWA_API_HTTP_HOST": "10.0.0.5"]).api?.port == 8080)
        #expect(try read(signIn, ["SIWA_API_HTTP_PORT": "0", "SIWA_HTTP_PORT": "0"]).api?.port == 0)
        #expect(try read(signIn, ["SIWA_API_HTTP_PORT": "8081", "SIWA_ADMIN_HTTP_PORT": "off"]).api?.port == 8081)
    }

    /// Sign-in is all three settings (with the team) or none; a malformed
    /// one stops start-up with one line naming it.
    @Test func signInSettingsAreAllOrNone() throws {
        let base = ["SIWA_DATABASE_URL": "postgres://u@h/d", "SIWA_APPLE_CLIENT_IDS": "a", "SIWA_APPLE_TEAM_ID": "ABCDE12345"]
        #expect(try ServerSettings(environment: SettingsReader(base)).signIn == nil)
        let some = base.merging(["SIWA_APPLE_KEY_ID": "XYZ987WVU6"]) { $1 }
        #expect(throws: (any Error).self) { try ServerSettings(environment: SettingsReader(some)) }
        do { _ = try ServerSettings(environment: SettingsReader(some)) } catch {
            #expect("\(error)".hasPrefix("SIWA_APPLE_PRIVATE_KEY_FILE: is required when SIWA_APPLE_KEY_ID is set"), "\(error)")
        }
        let all = base.merging(["SIWA_APPLE_TEAM_ID": "ABCDE12345", "SIWA_APPLE_KEY_ID": "XYZ987WVU6",
                                "SIWA_APPLE_PRIVATE_KEY_FILE": "/k.p8", "SIWA_TOKEN_ENCRYPTION_KEYS_FILE": "/ring"]) { $1 }
        let signIn = try #require(try ServerSettings(environment: SettingsReader(all)).signIn)
        #expect(signIn.appleBaseURL == "https://appleid.apple.com" && signIn.clientSecretTTLSeconds == 3600)
        let cases: [(String, String, String)] = [
            ("SIWA_APPLE_TEAM_ID", "abc", "SIWA_APPLE_TEAM_ID: expected 10 upper-case letters and digits, got 'abc'"),
            ("SIWA_CLIENT_SECRET_TTL_SECONDS", "15777001", "SIWA_CLIENT_SECRET_TTL_SECONDS: expected a whole number in 60...15777000, got '15777001'"),
            ("SIWA_REFRESH_VALIDATION_HOURS", "12",
             "SIWA_REFRESH_VALIDATION_HOURS: expected 0 (off) or at least 24 (Apple asks that a refresh token be validated at most once a day), got '12'"),
        ]
        for (name, value, message) in cases {
            do {
                _ = try ServerSettings(environment: SettingsReader(all.merging([name: value]) { $1 }))
                Issue.record("\(name)=\(value) was accepted")
            } catch {
                #expect("\(error)" == message)
            }
        }
    }

    /// A sign-in file that cannot be used stops serve and worker with one
    /// line naming the setting (exit 2), not a crash.
    @Test func unusableSignInFilesStopStartUpWithOneLine() async throws {
        let env = ["SIWA_DATABASE_URL": "postgres://u@127.0.0.1:9/x?sslmode=disable", "SIWA_APPLE_CLIENT_IDS": "a",
                   "SIWA_APPLE_TEAM_ID": "ABCDE12345", "SIWA_APPLE_KEY_ID": "XYZ987WVU6",
                   "SIWA_APPLE_PRIVATE_KEY_FILE": "/nonexistent/AuthKey.p8", "SIWA_TOKEN_ENCRYPTION_KEYS_FILE": "/nonexistent/ring"]
        for command in ["serve", "worker"] {
            let result = try await runSIWA([command], environment: env)
            #expect(result.status == 2, "\(command): \(result.output)")
            #expect(result.output.contains("siwa: SIWA_APPLE_PRIVATE_KEY_FILE: /nonexistent/AuthKey.p8: no such file"), "\(result.output)")
            #expect(!result.output.contains("crashed") && !result.output.contains("Fatal error"), "\(result.output)")
        }
    }
}
