import Foundation
import Logging
import NIOCore
import PostgresNIO

/// What `siwa tokens rekey` did.
public struct TokenRekeyReport: Sendable, Equatable {
    /// A row whose tokens did not open: left as it is.
    public struct Failure: Sendable, Equatable {
        public let userID: Int64
        public let clientID: String
        /// `TokenKeyRingError`'s description: the key id at most, never bytes.
        public let reason: String
    }

    public var reencrypted = 0
    public var alreadyCurrent = 0
    public var failures: [Failure] = []
}

/// Moves every stored Apple token (refresh and access) to the ring's
/// current key, as the runtime role.
///
/// Batches of `batchSize` rows in key order (user_id, client_id), each in a
/// transaction of its own that locks its rows (`FOR UPDATE`) before reading
/// them: a sign-in or validation that rewrites a row meanwhile waits for the
/// batch, or the batch waits for it and reads what it wrote, so neither
/// overwrites the other with a stale token. A row that does not open is
/// reported and left as it is; the others in its batch are re-encrypted.
public struct TokenRekey: Sendable {
    let client: PostgresClient
    let ring: TokenKeyRing
    let logger: Logger
    let batchSize: Int

    public init(client: PostgresClient, ring: TokenKeyRing, logger: Logger, batchSize: Int = 500) {
        self.client = client
        self.ring = ring
        self.logger = logger
        self.batchSize = max(1, batchSize)
    }

    public func run() async throws -> TokenRekeyReport {
        var report = TokenRekeyReport()
        var after: (userID: Int64, clientID: String)?
        while true {
            let batch = try await rekeyBatch(after: after)
            report.reencrypted += batch.report.reencrypted
            report.alreadyCurrent += batch.report.alreadyCurrent
            report.failures += batch.report.failures
            guard let last = batch.last else { return report }
            after = last
        }
    }

    private struct StoredRow {
        let userID: Int64
        let clientID: String
        let keyID: String
        let refreshToken: Data
        let accessToken: Data?
    }

    /// One batch after `after` (keyset pagination over the primary key);
    /// `last` is nil once the table has no rows left.
    private func rekeyBatch(after: (userID: Int64, clientID: String)?) async throws
        -> (report: TokenRekeyReport, last: (userID: Int64, clientID: String)?) {
        let ring = ring, logger = logger, limit = batchSize
        return try await client.withGuardedTransaction(logger: logger) { connection in
            let columns = "user_id, client_id, key_id, refresh_token, access_token"
            let query: PostgresQuery = if let after {
                """
                SELECT \(unescaped: columns) FROM siwa.apple_tokens
                WHERE (user_id, client_id) > (\(after.userID), \(after.clientID))
                ORDER BY user_id, client_id LIMIT \(limit) FOR UPDATE
                """
            } else {
                "SELECT \(unescaped: columns) FROM siwa.apple_tokens ORDER BY user_id, client_id LIMIT \(limit) FOR UPDATE"
            }
            var rows: [StoredRow] = []
            for try await (userID, clientID, keyID, refresh, access) in try await connection.query(query, logger: logger)
                .decode((Int64, String, String, Data, Data?).self) {
                rows.append(StoredRow(userID: userID, clientID: clientID, keyID: keyID, refreshToken: refresh, accessToken: access))
            }
            var report = TokenRekeyReport()
            var users: [Int64] = [], clients: [String] = [], refreshTokens: [ByteBuffer] = [], accessTokens: [ByteBuffer] = []
            for row in rows {
                if row.keyID == ring.currentKeyID {
                    report.alreadyCurrent += 1
                    continue
                }
                do {
                    func reseal(_ bytes: Data) throws -> Data {
                        let plaintext = try ring.open(SealedToken(keyID: row.keyID, bytes: bytes), userID: row.userID, clientID: row.clientID)
                        return try ring.seal(plaintext, userID: row.userID, clientID: row.clientID).bytes
                    }
                    let refresh = try reseal(row.refreshToken)
                    let access = try row.accessToken.map(reseal)
                    users.append(row.userID)
                    clients.append(row.clientID)
                    refreshTokens.append(ByteBuffer(bytes: refresh))
                    // A sealed token is never empty, so the empty value stands for NULL
                    // (PostgresNIO encodes no arrays of optionals).
                    accessTokens.append(ByteBuffer(bytes: access ?? Data()))
                } catch {
                    report.failures.append(.init(userID: row.userID, clientID: row.clientID, reason: "\(error)"))
                }
            }
            if !users.isEmpty {
                try await connection.query("""
                    UPDATE siwa.apple_tokens t
                    SET key_id = \(ring.currentKeyID), refresh_token = s.refresh_token, access_token = nullif(s.access_token, ''::bytea)
                    FROM unnest(\(users)::bigint[], \(clients)::text[], \(refreshTokens)::bytea[], \(accessTokens)::bytea[])
                         AS s(user_id, client_id, refresh_token, access_token)
                    WHERE t.user_id = s.user_id AND t.client_id = s.client_id
                    """, logger: logger)
                report.reencrypted = users.count
            }
            return (report, rows.last.map { ($0.userID, $0.clientID) })
        }
    }
}
