import AppleSimulator
import Foundation
import Testing

/// What an operator sees: start-up errors, logs, shutdown.
@Suite("Operations", .testDatabases, .timeLimit(.minutes(10)))
struct OperationsTests {
    @Test(arguments: [
        (["SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "app"], "SIWA_DATABASE_URL"),
        (["SIWA_DATABASE_URL": "postgres://siwa@127.0.0.1/siwa"], "SIWA_APPLE_CLIENT_IDS"),
        (["SIWA_DATABASE_URL": "mysql://x@y/z", "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "app"], "SIWA_DATABASE_URL"),
        (["SIWA_DATABASE_URL": "postgres://siwa@127.0.0.1/siwa", "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "app", "SIWA_HTTP_PORT": "eighty"], "SIWA_HTTP_PORT"),
        (["SIWA_DATABASE_URL": "postgres://siwa@127.0.0.1/siwa", "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "app", "SIWA_LOG_FORMAT": "xml"], "SIWA_LOG_FORMAT"),
        (["SIWA_DATABASE_URL": "postgres://siwa@127.0.0.1/siwa", "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "app", "SIWA_APPLE_JWKS_URL": "ftp://x"], "SIWA_APPLE_JWKS_URL"),
    ])
    func badSettingsStopStartUpWithOneLineNamingThem(_ environment: [String: String], _ name: String) async throws {
        var env = environment
        for key in ["SIWA_DATABASE_URL", "SIWA_APPLE_CLIENT_IDS", "SIWA_HTTP_PORT", "SIWA_LOG_FORMAT", "SIWA_APPLE_JWKS_URL"]
        where env[key] == nil { env[key] = "" }
        let result = try await runSIWA(["serve"], environment: env)
        #expect(result.status == 2)
        let lines = result.output.split(separator: "\n")
        #expect(lines.count == 1, "\(result.output)")
        #expect(lines.first?.hasPrefix("siwa: \(name)") == true, "\(result.output)")
    }

    /// Debug-level JSON logs of a real `siwa serve` carry no token, no email address.
    @Test func logsNeverContainATokenOrAnEmail() async throws {
        let (siwa, apple, appleServer) = try await Self.serveLoggingJSON(level: "trace")
        try atTestEnd { await appleServer.stop() }
        let url = "http://127.0.0.1:\(siwa.port)/apple/notifications"
        let email = "secret.person@privaterelay.appleid.com"
        let good = try apple.notification(type: "email-enabled", sub: "log.sub", audience: ServerHarness.clientID, email: email)
        let forged = try apple.notification(type: "email-enabled", sub: "log.sub", audience: ServerHarness.clientID, email: email,
                                            key: try apple.unpublishedKey())
        for token in [good, forged, good] {
            _ = try await HTTPAnswer.send(method: .POST, url: url, body: AppleSimulator.body(for: token),
                                          headers: [("Content-Type", "application/json")])
        }
        // Without the sign-in settings there is no /v1 at all, and start-up said so.
        let v1 = try await HTTPAnswer.send(method: .POST, url: "http://127.0.0.1:\(siwa.port)/v1/sign-in", body: Data("{}".utf8),
                                           headers: [("Content-Type", "application/json"), ("Authorization", "Bearer x")])
        #expect(v1.status == 404, "\(v1.status) \(v1.text)")
        #expect(await siwa.terminate() == 0)
        let log = siwa.log
        #expect(log.contains("Sign-in is off (no /v1 routes)"), "\(log.prefix(3000))")
        #expect(log.contains("\"level\""), "JSON log lines expected")
        #expect(!log.contains("eyJ"), "a token (or part of one) was logged")
        #expect(!log.contains(email))
        #expect(!log.contains("privaterelay"))
        // Every line is one JSON object.
        for line in log.split(separator: "\n") where !line.isEmpty {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: Any], "\(line)")
        }
    }

    /// Each line about a notification carries the request id of the
    /// delivery it is about (swift-log's metadata provider), one per
    /// delivery: recorded, duplicate, rejected and malformed alike.
    @Test func everyLineAboutANotificationCarriesItsRequestID() async throws {
        let (siwa, apple, appleServer) = try await Self.serveLoggingJSON(level: "debug")
        try atTestEnd { await appleServer.stop() }
        let url = "http://127.0.0.1:\(siwa.port)/apple/notifications"
        let good = try apple.notification(type: "email-disabled", sub: "rid.sub", audience: ServerHarness.clientID)
        let forged = try apple.notification(type: "email-disabled", sub: "rid.sub", audience: ServerHarness.clientID,
                                            key: try apple.unpublishedKey())
        let bodies = [AppleSimulator.body(for: good), AppleSimulator.body(for: good), AppleSimulator.body(for: forged), Data("{".utf8)]
        for body in bodies {
            _ = try await HTTPAnswer.send(method: .POST, url: url, body: body, headers: [("Content-Type", "application/json")])
        }
        #expect(await siwa.terminate() == 0)
        let lines = siwa.log.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let aboutNotifications = lines.filter { $0["logger"] as? String == "siwa.notifications" }
        #expect(aboutNotifications.count >= bodies.count, "\(siwa.log.suffix(3000))")
        let ids = aboutNotifications.compactMap { $0["request_id"] as? String }
        #expect(ids.count == aboutNotifications.count, "a line about a notification without its request id: \(aboutNotifications)")
        #expect(Set(ids).count == bodies.count, "one request id per delivery: \(ids)")
        #expect(!lines.contains { $0["request_id"] != nil && $0["logger"] as? String == "siwa.serve" }, "no request id outside a request")
    }

    /// The caller's `X-Request-Id`, when sane, is the one its answer
    /// carries and every line about it; an insane one is replaced, on both.
    @Test func theCallersRequestIDIsOnTheAnswerAndTheLines() async throws {
        let (siwa, apple, appleServer) = try await Self.serveLoggingJSON(level: "info")
        try atTestEnd { await appleServer.stop() }
        let url = "http://127.0.0.1:\(siwa.port)/apple/notifications"
        let token = try apple.notification(type: "email-disabled", sub: "rid.caller", audience: ServerHarness.clientID)
        let given = try await HTTPAnswer.send(method: .POST, url: url, body: AppleSimulator.body(for: token),
                                              headers: [("Content-Type", "application/json"), ("X-Request-Id", "backend-req-7f3a")])
        #expect(given.status == 200 && given.headers.first(name: "X-Request-Id") == "backend-req-7f3a")
        let insane = try await HTTPAnswer.send(method: .POST, url: url, body: Data("{".utf8),
                                               headers: [("Content-Type", "application/json"), ("X-Request-Id", "bad id <x>")])
        let made = try #require(insane.headers.first(name: "X-Request-Id"))
        #expect(insane.status == 400 && made != "bad id <x>" && !made.isEmpty)
        #expect(await siwa.terminate() == 0)
        let lines = siwa.log.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let notifications = lines.filter { $0["logger"] as? String == "siwa.notifications" }
        #expect(notifications.contains { $0["request_id"] as? String == "backend-req-7f3a" && ($0["msg"] as? String ?? "").contains("recorded") },
                "\(siwa.log.suffix(3000))")
        #expect(notifications.contains { $0["request_id"] as? String == made }, "\(siwa.log.suffix(3000))")
        #expect(!siwa.log.contains("bad id"))
    }

    /// A real `siwa serve` on a database of its own, writing JSON lines at
    /// `level`, that takes the Apple simulator's keys (stop its server).
    static func serveLoggingJSON(level: String) async throws -> (SIWAProcess, AppleSimulator, RunningServer) {
        let database = try await TestDatabase.create()
        let apple = try AppleSimulator()
        let appleServer = try await TestPorts.serve { try await apple.start(port: $0) }
        do {
            let siwa = try await SIWAProcess.serve(environment: [
                "SIWA_DATABASE_URL": database.serveURL, "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
                "SIWA_APPLE_JWKS_URL": appleServer.baseURL + "/auth/keys", "SIWA_LOG_LEVEL": level, "SIWA_LOG_FORMAT": "json",
            ])
            return (siwa, apple, appleServer)
        } catch {
            await appleServer.stop()
            throw error
        }
    }
}
