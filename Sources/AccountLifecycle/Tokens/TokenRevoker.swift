import AccountStore
import AppleSignIn
import Foundation
import Logging

/// The purge's first step for a user with stored Apple tokens (TN3194: an
/// app that deletes an account revokes its tokens): each refresh token is
/// revoked at Apple's `/auth/revoke`, and only then deleted, in the same
/// transaction as the step's record. A worker killed after Apple's answer
/// and before the record revokes again on the retry (Apple answers 200 for
/// a token it already revoked); a token is never deleted unrevoked.
public struct TokenRevoker: Sendable {
    let apple: AppleAuthClient
    let keyRing: TokenKeyRing
    let store: AppleTokenStore
    let logger: Logger

    public init(apple: AppleAuthClient, keyRing: TokenKeyRing, store: AppleTokenStore, logger: Logger) {
        self.apple = apple
        self.keyRing = keyRing
        self.store = store
        self.logger = logger
    }

    /// Revokes and deletes the job's user's tokens (for a token-only
    /// sign-out, `signOut`, those stored before its revocation). false: the lease was lost.
    func revoke(for job: ClaimedJob, sub: String, team: String, signOut: Bool, step: JobStep) async throws -> Bool {
        let tokens = try await store.tokens(appleSub: sub, team: team, signOut: signOut ? job.id : nil)
        var revoked: [TokenRevocation] = []
        for token in tokens {
            let plaintext: String
            do {
                plaintext = try keyRing.open(SealedToken(keyID: token.keyID, bytes: token.refreshToken),
                                             userID: token.userID, clientID: token.clientID)
            } catch {
                throw StepFailure(step: step.name, detail: "the token for client \(token.clientID) cannot be decrypted: \(error)",
                                  summary: "a stored token cannot be decrypted (key \(token.keyID)); restore that key to the ring",
                                  permanent: false)
            }
            let status: Int
            switch await apple.revoke(token: plaintext, clientID: token.clientID, tokenTypeHint: .refreshToken) {
            case .success: status = 200
            // A token Apple no longer knows (the user revoked it) is as good as revoked.
            case .invalidGrant: status = 400
            case .invalidClient:
                throw Self.failure(step, "Apple refused siwa's client credentials (invalid_client) for \(token.clientID)")
            case .rejected(let code, let error):
                throw Self.failure(step, "Apple refused the revocation (HTTP \(code)\(error.map { ", \($0)" } ?? ""))")
            case .unavailable(_, let reason):
                throw Self.failure(step, "Apple's revoke endpoint is unavailable: \(reason)")
            }
            revoked.append(TokenRevocation(userID: token.userID, clientID: token.clientID, refreshToken: token.refreshToken,
                                           appleStatus: status))
        }
        return try await store.recordRevoked(revoked, appleSub: sub, team: team, step: step)
    }

    static func failure(_ step: JobStep, _ text: String) -> StepFailure {
        StepFailure(step: step.name, detail: text, summary: text, permanent: false)
    }
}
