import Foundation
import Logging
import PostgresNIO

/// The operator's way out when a stored token cannot be decrypted (its key
/// left the ring): siwa cannot revoke it at Apple, and the purge's erase
/// never deletes a token that was not revoked, so the user's purge would
/// fail until its attempts run out. `siwa tokens forget SUB` deletes such
/// tokens, each with an audit row `token.forgotten`; the purge then goes on,
/// and the user revokes the app by hand at Apple.
public struct UnrevocableTokens: Sendable {
    let client: PostgresClient
    let ring: TokenKeyRing
    let logger: Logger

    public init(client: PostgresClient, ring: TokenKeyRing, logger: Logger) {
        self.client = client
        self.ring = ring
        self.logger = logger
    }

    public struct Forgotten: Sendable, Equatable {
        public let clientID: String
        public let keyID: String
    }

    /// Deletes the user's tokens that do not decrypt with the ring, and
    /// returns them; tokens that decrypt are left (they can be revoked).
    public func forget(appleSub: String, team: String, loginHint: String?) async throws -> (forgotten: [Forgotten], kept: Int) {
        let ring = self.ring
        return try await client.withGuardedTransaction(logger: logger) { [logger] connection in
            let rows = try await connection.query("""
                SELECT t.user_id, t.client_id, t.key_id, t.refresh_token
                FROM siwa.users AS u JOIN siwa.apple_tokens AS t ON t.user_id = u.id
                WHERE u.apple_sub = \(appleSub) AND u.apple_team = \(team) ORDER BY t.client_id FOR UPDATE OF t
                """, logger: logger).collect()
            var forgotten: [Forgotten] = []
            var kept = 0
            for row in rows {
                let (userID, clientID, keyID, token) = try row.decode((Int64, String, String, Data).self)
                if (try? ring.open(SealedToken(keyID: keyID, bytes: token), userID: userID, clientID: clientID)) != nil {
                    kept += 1
                    continue
                }
                try await connection.query("""
                    WITH gone AS (
                        DELETE FROM siwa.apple_tokens WHERE user_id = \(userID) AND client_id = \(clientID) AND refresh_token = \(token)
                        RETURNING user_id
                    )
                    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
                    SELECT 'admin', 'token.forgotten', \(appleSub), \(team),
                           jsonb_build_object('user_id', user_id, 'client_id', \(clientID)::text, 'key_id', \(keyID)::text,
                                              'reason', 'does not decrypt with the key ring: not revoked at Apple',
                                              'db_user', session_user::text, 'login_hint', \(loginHint)::text)
                    FROM gone
                    """, logger: logger)
                forgotten.append(Forgotten(clientID: clientID, keyID: keyID))
            }
            return (forgotten, kept)
        }
    }
}
