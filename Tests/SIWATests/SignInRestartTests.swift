import AccountStore
import AppleSimulator
import Foundation
import Synchronization
import Testing

extension FaultTests {
    /// PostgreSQL restarted while backends keep signing users in (their
    /// calls batched together): no answer is a 500, every 200 is stored
    /// (the user, the token, the audit row), a 503 retried with the same
    /// code gets the stored answer or Apple's `invalid_grant`, never another
    /// user's record, and sign-in works again without restarting siwa.
    @Test func databaseRestartUnderSignInsLosesNoAnsweredSignIn() async throws {
        let database = try await TestDatabase.create(serverURL: try TestEnvironment.faultDatabaseURL)
        let fixture = try SignInFixture.files()
        let siwa = try await ServerHarness.start(database: database, signIn: fixture)
        try atTestEnd { await siwa.stop() }
        let key = try await SignInFixture.apiKey(in: database)
        let url = siwa.apiURL + "/v1/sign-in"
        let subs = (0..<240).map { "restart.signin.\($0)" }
        let bodies = try subs.map { sub in
            let token = try siwa.simulator.identityToken(sub: sub, audience: ServerHarness.clientID, email: nil, nonce: nil)
            let code = siwa.simulator.issueAuthorizationCode(sub: sub, clientID: ServerHarness.clientID, email: nil,
                                                             isPrivateEmail: nil, nonce: nil, idTokenSub: nil)
            return try JSONSerialization.data(withJSONObject: ["identity_token": token, "authorization_code": code])
        }
        let answers = Locked([Int: HTTPAnswer]())
        let unavailable = Locked(0)
        let deadline = ContinuousClock.now + .seconds(120)
        // A backend retries a 503 with the same request (until the test's deadline).
        let senders = Task {
            await sendEachUntilDone(count: bodies.count, senders: 8, pause: .milliseconds(50), until: deadline) { i in
                guard let answer = try? await HTTPAnswer.send(
                    method: .POST, url: url, body: bodies[i],
                    headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(key)")]) else { return false }
                answers.withLock { $0[i] = answer }
                guard answer.status == 503 else { return true }
                unavailable.withLock { $0 += 1 }
                return false
            }
        }
        #expect(try await eventually(upTo: .seconds(60)) { answers.withLock { $0.count } >= 60 }, "the senders got going")
        try await pgScript("stop", "fault")
        // Down until the senders have felt it (503s), however slowly they go.
        let unavailableAtStop = unavailable.withLock { $0 }
        #expect(try await eventually(upTo: .seconds(60)) { unavailable.withLock { $0 } > unavailableAtStop },
                "no 503 while PostgreSQL was down")
        try await pgScript("start", "fault")
        await senders.value

        let final = answers.withLock { $0 }
        #expect(final.count == subs.count)
        #expect(unavailable.withLock { $0 } > 0, "the outage should have been felt (503s)")
        #expect(ContinuousClock.now < deadline, "sign-ins were still refused two minutes on")
        var signedIn: [String] = []
        for (i, answer) in final.sorted(by: { $0.key < $1.key }) {
            switch answer.status {
            case 200:
                #expect(answer.json["apple_sub"] as? String == subs[i], "another user's record: \(answer.text)")
                signedIn.append(subs[i])
            case 400:
                // The first try reached Apple and then failed to store: the code is used.
                #expect(answer.reason == "invalid_grant", "\(subs[i]): \(answer.text)")
            default:
                Issue.record("\(subs[i]): \(answer.status) \(answer.text)")
            }
        }
        #expect(signedIn.count > subs.count / 2)
        // Every answered sign-in is stored: the user, one token, one audit row.
        let list = signedIn.map { "'\($0)'" }.joined(separator: ",")
        #expect(try await database.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub IN (\(list))") == signedIn.count)
        #expect(try await database.scalar("""
            SELECT count(*) FROM siwa.apple_tokens t JOIN siwa.users u ON u.id = t.user_id WHERE u.apple_sub IN (\(list))
            """) == signedIn.count)
        #expect(try await database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'user.signed_in' AND apple_sub IN (\(list))
            """) == signedIn.count)
        // No stored token was revoked at Apple (a store that may have
        // committed keeps its token; only one surely not stored is revoked),
        // and no user was signed out by it. Checked once the revocations
        // siwa had to make are done (no live grant left that no row holds,
        // below): a wrong one would have gone out with them.
        let ring = try TokenKeyRing.load(path: fixture.keyRingFile).ring
        let stored = try await database.strings("""
            SELECT user_id || '|' || client_id || '|' || key_id || '|' || encode(refresh_token, 'base64') FROM siwa.apple_tokens
            """)
        #expect(stored.count >= signedIn.count)
        // No live grant that siwa does not hold: a token whose store's
        // outcome stayed unknown and that no row holds is revoked once the
        // database answers again (UnknownSignInOutcomes).
        let held = Set(try stored.map { row in
            let parts = row.split(separator: "|", maxSplits: 3).map(String.init)
            let bytes = try #require(Data(base64Encoded: parts[3].replacingOccurrences(of: "\n", with: "")))
            return try ring.open(SealedToken(keyID: parts[2], bytes: bytes), userID: try #require(Int64(parts[0])), clientID: parts[1])
        })
        func liveButNotHeld() -> [String] {
            siwa.simulator.issuedRefreshTokens.filter { !held.contains($0) && siwa.simulator.isRefreshTokenLive($0) }
        }
        #expect(try await eventually(upTo: .seconds(60)) { liveButNotHeld().isEmpty },
                "\(liveButNotHeld().count) refresh tokens are live at Apple and held by no row")
        for token in held {
            #expect(siwa.simulator.isRefreshTokenLive(token), "a stored refresh token was revoked at Apple")
        }
        #expect(try await database.scalar("SELECT count(*) FROM siwa.users WHERE status <> 'active'") == 0)
        // And sign-in works again.
        let sub = "restart.signin.after"
        let after = try await HTTPAnswer.send(
            method: .POST, url: url,
            body: try JSONSerialization.data(withJSONObject: [
                "identity_token": try siwa.simulator.identityToken(sub: sub, audience: ServerHarness.clientID, email: nil, nonce: nil),
                "authorization_code": siwa.simulator.issueAuthorizationCode(sub: sub, clientID: ServerHarness.clientID, email: nil,
                                                                            isPrivateEmail: nil, nonce: nil, idTokenSub: nil),
            ]),
            headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(key)")])
        #expect(after.status == 200, "\(after.text)")
    }
}
