import AccountLifecycle
import AccountStore
import AppleSimulator
import Foundation
import Testing

/// The token lifecycle never writes a secret or a person into a log line:
/// a real `siwa serve` and `siwa worker`, both at trace level with JSON
/// lines, run a sign-in (with Apple's `user` object), a lookup, an in-app
/// deletion and its purge (revoking at the simulator); then neither log
/// holds a token of any kind, the authorization code, the API key, the
/// email or a name.
@Suite("Sign-in logs", .testDatabases, .timeLimit(.minutes(10)))
struct SignInLogTests {
    @Test func theTokenLifecycleLogsNoSecretAndNoPerson() async throws {
        let database = try await TestDatabase.create()
        let files = try SignInFixture.files()
        let apple = try AppleSimulator()
        let appleServer = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await appleServer.stop() }
        files.register(with: apple)
        let base: [String: String] = SignInFixture.settings(files, appleBaseURL: appleServer.baseURL).merging([
            "SIWA_DATABASE_URL": database.serveURL, "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
            "SIWA_APPLE_JWKS_URL": appleServer.baseURL + "/auth/keys",
            "SIWA_LOG_LEVEL": "trace", "SIWA_LOG_FORMAT": "json",
        ]) { $1 }
        let serve = try await SIWAProcess.serve(environment: base)
        try atTestEnd { await serve.kill9() }
        let apiKey = try await SignInFixture.apiKey(in: database)

        let sub = "001.logs.0001", email = "hidden.person@privaterelay.appleid.com", nonce = "nonce-logs-1"
        let identityToken = try apple.identityToken(sub: sub, audience: ServerHarness.clientID, email: email,
                                                    nonce: SignInService.hashedNonce(nonce))
        let code = apple.issueAuthorizationCode(sub: sub, clientID: ServerHarness.clientID, email: email,
                                                isPrivateEmail: true, nonce: SignInService.hashedNonce(nonce))
        let body: [String: Any] = ["identity_token": identityToken, "authorization_code": code, "nonce": nonce,
                                   "user": ["name": ["firstName": "Zephyrine", "lastName": "Quillfeather"], "email": email]]
        let headers = [("Content-Type", "application/json"), ("Authorization", "Bearer \(apiKey)")]
        let url = "http://127.0.0.1:\(serve.apiPort)"
        let signedIn = try await HTTPAnswer.send(method: .POST, url: url + "/v1/sign-in",
                                                 body: try JSONSerialization.data(withJSONObject: body),
                                                 headers: headers + [("X-Request-Id", "backend-signin-0001")])
        #expect(signedIn.status == 200 && signedIn.json["refresh_token_stored"] as? Bool == true, "\(signedIn.text)")
        #expect(signedIn.headers.first(name: "X-Request-Id") == "backend-signin-0001")
        // A retry (the replay path) and a refused one (a bad key) log too.
        _ = try await HTTPAnswer.send(method: .POST, url: url + "/v1/sign-in",
                                      body: try JSONSerialization.data(withJSONObject: body), headers: headers)
        _ = try await HTTPAnswer.send(method: .GET, url: url + "/v1/users/\(sub)", body: nil,
                                      headers: [("Authorization", "Bearer \(apiKey)x")])
        #expect(try await HTTPAnswer.send(method: .GET, url: url + "/v1/users/\(sub)", body: nil, headers: headers).status == 200)
        let deleted = try await HTTPAnswer.send(method: .DELETE, url: url + "/v1/users/\(sub)", body: nil, headers: headers)
        #expect(deleted.status == 202, "\(deleted.text)")

        let worker = try await WorkerHarness.start(database: database, settings: base.merging(["SIWA_DATABASE_URL": database.workerURL]) { $1 })
        try atTestEnd { await worker.stop() }
        let process = try worker.startWorker()
        try atTestEnd { await process.kill9() }
        #expect(try await worker.wait(upTo: .seconds(30)) {
            try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE state = 'completed'") == 1
        }, "\(process.log.suffix(2000))")
        let refreshTokens = apple.issuedRefreshTokens, accessTokens = apple.issuedAccessTokens
        #expect(!refreshTokens.isEmpty && !accessTokens.isEmpty)
        #expect(apple.revokedTokens == refreshTokens, "the purge revoked the stored token")
        #expect(await process.terminate() == 0)
        #expect(await serve.terminate() == 0)

        let secrets = refreshTokens + accessTokens + [code, apiKey, email, "Zephyrine", "Quillfeather", "privaterelay", "eyJ"]
        for (name, log) in [("serve", serve.log), ("worker", process.log)] {
            #expect(log.contains("\"level\":\"trace\"") || log.contains("\"level\":\"debug\""), "\(name) logged at trace")
            for secret in secrets {
                #expect(!log.contains(secret), "\(name)'s log holds a secret or a person (\(secret.prefix(3))…)")
            }
        }
        #expect(serve.log.contains("Sign-in is on: /v1/sign-in"), "start-up says sign-in is on")
        // The backend's request id is on the sign-in's lines, whichever logger wrote them.
        let lines = serve.log.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let tagged = lines.filter { $0["request_id"] as? String == "backend-signin-0001" }
        #expect(!tagged.isEmpty, "\(serve.log.suffix(3000))")
    }
}
