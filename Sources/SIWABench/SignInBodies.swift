import AccountLifecycle
import AppleSimulator
import Foundation

/// What the sign-in part sends, made before any clock starts: for each
/// sign-in a new user's identity token (RS256, signed by the simulator) and
/// a fresh authorization code, as the app's backend passes them on at a
/// first sign-in (nonce and Apple's `user` object included); and Apple's
/// notifications about those same users.
struct SignInBodies {
    let warmUp: [Data]
    let rounds: [[Data]]
    let warmUpNotifications: [Data]
    let notificationRounds: [[Data]]

    var signIns: Int { warmUp.count + rounds.map(\.count).reduce(0, +) }

    static func sign(apple: AppleSimulator, clientID: String, warmUp: Int, rounds: Int, perRound: Int,
                     notificationsPerRound: Int) async throws -> SignInBodies {
        let runID = UUID().uuidString.prefix(8).lowercased()
        let total = warmUp + rounds * perRound
        // Apple's subs look like `001234.<32 hex>.1234`.
        let sub = { @Sendable (i: Int) in "001\(String(format: "%03d", i % 1000)).bench\(runID).\(i)" }
        let signIns = try await parallel(total) { i in try signIn(apple: apple, clientID: clientID, sub: sub(i), index: i) }
        // Round r's notifications are about round r's users (each signed in
        // just before), alternating email-enabled and email-disabled.
        let firstUser = { @Sendable (round: Int) in round < 0 ? 0 : warmUp + round * perRound }
        let usersOf = { @Sendable (round: Int) in round < 0 ? warmUp : perRound }
        let notificationCount = warmUp + rounds * notificationsPerRound
        let notifications = try await parallel(notificationCount) { i in
            let (round, n) = i < warmUp ? (-1, i) : ((i - warmUp) / notificationsPerRound, (i - warmUp) % notificationsPerRound)
            let user = sub(firstUser(round) + n % usersOf(round))
            return AppleSimulator.body(for: try apple.notification(
                type: n % 2 == 0 ? "email-disabled" : "email-enabled", sub: user, audience: clientID,
                jti: "bench-signin-\(runID)-\(i)", email: "bench@privaterelay.appleid.com", isPrivateEmail: true))
        }
        return SignInBodies(
            warmUp: Array(signIns.prefix(warmUp)),
            rounds: (0..<rounds).map { Array(signIns[(warmUp + $0 * perRound)..<(warmUp + ($0 + 1) * perRound)]) },
            warmUpNotifications: Array(notifications.prefix(warmUp)),
            notificationRounds: (0..<rounds).map {
                Array(notifications[(warmUp + $0 * notificationsPerRound)..<(warmUp + ($0 + 1) * notificationsPerRound)])
            })
    }

    /// One `POST /v1/sign-in` body, on one line.
    static func signIn(apple: AppleSimulator, clientID: String, sub: String, index: Int) throws -> Data {
        let email = "bench\(index)@privaterelay.appleid.com"
        // The app sends the raw nonce; Apple's tokens carry its SHA-256 hex (docs/http-api.md, sign-in).
        let nonce = "bench-nonce-\(index)"
        let hashed = SignInService.hashedNonce(nonce)
        let token = try apple.identityToken(sub: sub, audience: clientID, email: email, nonce: hashed)
        let code = apple.issueAuthorizationCode(sub: sub, clientID: clientID, email: email, isPrivateEmail: true, nonce: hashed,
                                                presignIDToken: true)
        return try JSONSerialization.data(withJSONObject: [
            "identity_token": token, "authorization_code": code, "nonce": nonce,
            "user": ["name": ["firstName": "Bench", "lastName": "User \(index)"], "email": email] as [String: Any],
        ] as [String: Any])
    }

    /// `make(0) ..< make(count - 1)` on every core, in order.
    static func parallel(_ count: Int, _ make: @escaping @Sendable (Int) throws -> Data) async throws -> [Data] {
        try await withThrowingTaskGroup(of: (Int, [Data]).self) { group in
            let chunk = 500
            for start in stride(from: 0, to: count, by: chunk) {
                group.addTask { (start, try (start..<min(count, start + chunk)).map(make)) }
            }
            var chunks: [(Int, [Data])] = []
            for try await chunk in group { chunks.append(chunk) }
            return chunks.sorted { $0.0 < $1.0 }.flatMap(\.1)
        }
    }
}
