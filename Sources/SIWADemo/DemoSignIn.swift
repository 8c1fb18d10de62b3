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

/// The demo's third part, the token lifecycle: an API key for the app's
/// backend, a sign-in (siwa exchanges the code at the simulator's
/// `/auth/token`), the user's record, an in-app deletion, and `siwa worker`
/// revoking the token at the simulator's `/auth/revoke` before the purge.
struct DemoSignIn {
    let demo: Demo
    let files: Files
    let apple: AppleSimulator
    /// The API listener (`/v1`).
    let api: String
    let clientID: String

    /// A web client (a Services ID) and its Return URL: nothing is ever sent
    /// there here, Apple only binds the code to it.
    static let webClientID = "com.example.siwa.web"
    static let returnURL = "https://app.example.com/auth/apple/callback"
    /// The serve settings that make `webClientID` an accepted web client.
    static func clientSettings(native clientID: String) -> [String: String] {
        ["SIWA_APPLE_CLIENT_IDS": "\(clientID),\(webClientID)", "SIWA_APPLE_WEB_CLIENT_IDS": "\(webClientID)=\(returnURL)"]
    }

    /// The team key (`.p8`, registered with the simulator) and the token key
    /// ring, in a temporary directory, mode 0600; and the settings that
    /// turn sign-in on against the simulator.
    struct Files: Sendable {
        let keys: SimulatedTeamKeyFiles
        let settings: [String: String]

        init(apple: AppleSimulator, appleBaseURL: String) throws {
            keys = try SimulatedTeamKeyFiles(teamID: "DEMOTEAM01", keyID: "DEMOKEY001",
                                             keyRing: [TokenKeyRing.newKeyLine(id: "demo1")], label: "demo-keys")
            keys.register(with: apple)
            settings = keys.settings(appleBaseURL: appleBaseURL)
        }

        func remove() { keys.remove() }
    }

    func run(sub: String, client: PostgresClient) async throws {
        print("\n— Sign-in and in-app deletion (the token lifecycle) —")
        let key = try await demo.createAPIKey(named: "demo-backend")
        print("siwa api-keys create demo-backend -> a key for the app's backend (shown once): \(key.prefix(18))…")

        let identityToken = try apple.identityToken(sub: sub, audience: clientID, email: "signin@privaterelay.appleid.com")
        let code = apple.issueAuthorizationCode(sub: sub, clientID: clientID, email: "signin@privaterelay.appleid.com", isPrivateEmail: true)
        let body = try JSONSerialization.data(withJSONObject: [
            "identity_token": identityToken, "authorization_code": code,
            "user": ["name": ["firstName": "Demo", "lastName": "User"]],
        ] as [String: Any])
        print("\ncurl -H 'Authorization: Bearer $KEY' -d '{\"identity_token\": …, \"authorization_code\": …, \"user\": …}' \(api)/v1/sign-in")
        print("  -> \(try await Demo.send(.POST, api + "/v1/sign-in", key: key, body: body))")
        print("curl -H 'Authorization: Bearer $KEY' \(api)/v1/users/\(sub)")
        print("  -> \(try await Demo.send(.GET, api + "/v1/users/\(sub)", key: key))")
        print("curl -X DELETE -H 'Authorization: Bearer $KEY' \(api)/v1/users/\(sub)")
        print("  -> \(try await Demo.send(.DELETE, api + "/v1/users/\(sub)", key: key))")
        try await signInOnTheWeb(sub: sub + ".web", key: key)

        print("\nsiwa worker: revoking the token at Apple, then purging…")
        let worker = try demo.spawn("worker", environment: [
            "SIWA_DATABASE_URL": demo.database.workerURL, "SIWA_LOG_LEVEL": "warning",
        ].merging(files.settings) { $1 })
        defer { if worker.isRunning { worker.signal(SIGTERM) } }
        try await Demo.waitForJobs(of: [sub], client: client)
        worker.signal(SIGTERM)
        _ = await worker.wait()
        let revoked = apple.revokedTokens
        print("Apple simulator /auth/revoke received \(revoked.count) token(s): \(revoked.map { String($0.prefix(10)) + "…" }.joined(separator: ", "))"
              + (revoked.allSatisfy { !apple.isRefreshTokenLive($0) } ? " (now revoked)" : ""))
        try await Demo.printReports(Self.reports(sub: sub), client: client)
    }

    /// The web flow (Sign in with Apple JS, `response_type=code`): the
    /// backend has a code bound to the redirect URI, no identity token;
    /// siwa exchanges the code and verifies the id_token of Apple's answer.
    private func signInOnTheWeb(sub: String, key: String) async throws {
        let code = apple.issueAuthorizationCode(sub: sub, clientID: Self.webClientID, email: "web@privaterelay.appleid.com",
                                                isPrivateEmail: true, redirectURI: Self.returnURL)
        let body = try JSONSerialization.data(withJSONObject: [
            "authorization_code": code, "client_id": Self.webClientID, "redirect_uri": Self.returnURL,
            "user": ["name": ["firstName": "Web", "lastName": "User"]],
        ] as [String: Any])
        print("\nOn the web (no identity token; the code is bound to the redirect URI):")
        print("curl -H 'Authorization: Bearer $KEY' -d '{\"authorization_code\": …, \"client_id\": \"\(Self.webClientID)\", \"redirect_uri\": \"\(Self.returnURL)\", \"user\": …}' \(api)/v1/sign-in")
        print("  -> \(try await Demo.send(.POST, api + "/v1/sign-in", key: key, body: body))")
    }



    static func reports(sub: String) -> [(String, String)] {
        let quoted = "'" + sub.replacingOccurrences(of: "'", with: "") + "'"
        return [
            ("siwa.users (tombstone: email and names erased)", """
                SELECT id::text, apple_sub, status, (email IS NOT NULL)::text AS has_email, (given_name IS NOT NULL)::text AS has_name,
                       (purged_at IS NOT NULL)::text AS purged
                FROM siwa.users WHERE apple_sub = \(quoted)
                """),
            ("siwa.apple_tokens (the user's)", """
                SELECT user_id::text, client_id FROM siwa.apple_tokens
                WHERE user_id IN (SELECT id FROM siwa.users WHERE apple_sub = \(quoted))
                """),
            ("siwa.audit_log", """
                SELECT seq::text, actor, action, coalesce(details->>'api_key', details->>'step', (details->>'apple_status')) AS detail
                FROM siwa.audit_log WHERE apple_sub = \(quoted) ORDER BY seq
                """),
        ]
    }
}
