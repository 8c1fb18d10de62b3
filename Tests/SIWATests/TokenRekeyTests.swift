import AccountStore
import Foundation
import NIOCore
import PostgresNIO
import Testing

/// `siwa tokens rekey` end to end: the real executable, as the runtime role,
/// on rows sealed under an old key.
@Suite("Token rekey", .testDatabases)
struct TokenRekeyTests {
    struct Row {
        let userID: Int64
        let clientID: String
        let refresh: String
        let access: String?
    }

    static func insertUser(_ client: PostgresClient, sub: String) async throws -> Int64 {
        let rows = try await client.query("INSERT INTO siwa.users (apple_sub, apple_team) VALUES (\(sub), 'TEAM123456') RETURNING id", logger: TestEnvironment.logger)
        for try await id in rows.decode(Int64.self) { return id }
        throw TestSetupError("no user inserted")
    }

    static func store(_ client: PostgresClient, userID: Int64, clientID: String, keyID: String, refresh: Data, access: Data?) async throws {
        try await client.query("""
            INSERT INTO siwa.apple_tokens (user_id, client_id, key_id, refresh_token, access_token, validate_after)
            VALUES (\(userID), \(clientID), \(keyID), \(refresh), \(access), now() + interval '1 day')
            """, logger: TestEnvironment.logger)
    }

    /// (key id, refresh token, access token) per (user id, client id), read as the owner.
    static func stored(_ database: TestDatabase) async throws -> [String: (String, Data, Data?)] {
        try await database.withClient { client in
            var result: [String: (String, Data, Data?)] = [:]
            let rows = try await client.query(
                "SELECT user_id, client_id, key_id, refresh_token, access_token FROM siwa.apple_tokens", logger: TestEnvironment.logger)
            for try await (user, clientID, keyID, refresh, access) in rows.decode((Int64, String, String, Data, Data?).self) {
                result["\(user)/\(clientID)"] = (keyID, refresh, access)
            }
            return result
        }
    }

    @Test func rekeyMovesEveryTokenToTheFirstKeyAndLeavesAMovedCiphertextAlone() async throws {
        let database = try await TestDatabase.create()
        let old = try TokenKeyRingTests.ring("old")
        let rotated = try TokenKeyRingTests.ring("new", "old")
        let newOnly = try TokenKeyRingTests.ring("new")

        // Rows written by a siwa that had only the old key, one already
        // under the new key, and one whose ciphertext was copied from
        // another user's row. All as the runtime role, as sign-in writes them.
        let (rows, moved) = try await TestDatabase.withClient(try database.serveConfiguration) { client -> ([Row], Int64) in
            let alice = try await Self.insertUser(client, sub: "rekey.alice")
            let bob = try await Self.insertUser(client, sub: "rekey.bob")
            let carol = try await Self.insertUser(client, sub: "rekey.carol")
            let mallory = try await Self.insertUser(client, sub: "rekey.mallory")
            let rows = [
                Row(userID: alice, clientID: "com.example.app", refresh: "r.alice.app", access: "a.alice.app"),
                Row(userID: alice, clientID: "com.example.web", refresh: "r.alice.web", access: nil),
                Row(userID: bob, clientID: "com.example.app", refresh: "r.bob.app", access: "a.bob.app"),
                Row(userID: carol, clientID: "com.example.app", refresh: "r.carol.app", access: nil),
            ]
            for row in rows {
                let ring = row.userID == carol ? rotated : old
                let refresh = try ring.seal(row.refresh, userID: row.userID, clientID: row.clientID)
                let access = try row.access.map { try ring.seal($0, userID: row.userID, clientID: row.clientID).bytes }
                try await Self.store(client, userID: row.userID, clientID: row.clientID, keyID: refresh.keyID, refresh: refresh.bytes, access: access)
            }
            let bobs = try old.seal("r.bob.app", userID: bob, clientID: "com.example.app")
            try await Self.store(client, userID: mallory, clientID: "com.example.app", keyID: "old", refresh: bobs.bytes, access: nil)
            return (rows, mallory)
        }
        let before = try await Self.stored(database)

        let ringFile = try TokenKeyRingTests.write(["new", "old"].map { "\($0):\(TokenKeyRingTests.keys[$0]!.base64EncodedString())" }
            .joined(separator: "\n"))
        defer { try? FileManager.default.removeItem(atPath: ringFile) }
        let environment = ["SIWA_DATABASE_URL": database.workerURL, "SIWA_TOKEN_ENCRYPTION_KEYS_FILE": ringFile]
        // Batches of 2 over 5 rows: the keyset pagination crosses users.
        let run = try await runSIWA(["tokens", "rekey", "--batch-size", "2"], environment: environment)
        #expect(run.status == 1, "\(run.output)")
        #expect(run.output.contains("re-encrypted: 3"), "\(run.output)")
        #expect(run.output.contains("already current: 1"), "\(run.output)")
        #expect(run.output.contains("failed to decrypt: 1"), "\(run.output)")
        #expect(run.output.contains("failed: user_id \(moved) client_id com.example.app: the ciphertext does not belong to this row"), "\(run.output)")
        #expect(!run.output.contains("SIWA_TOKEN_ENCRYPTION_KEYS_FILE is not a siwa setting"), "\(run.output)")
        for row in rows {
            #expect(!run.output.contains(row.refresh))
        }

        let after = try await Self.stored(database)
        for row in rows {
            let (keyID, refresh, access) = try #require(after["\(row.userID)/\(row.clientID)"])
            #expect(keyID == "new")
            #expect(try newOnly.open(SealedToken(keyID: keyID, bytes: refresh), userID: row.userID, clientID: row.clientID) == row.refresh)
            #expect(try access.map { try newOnly.open(SealedToken(keyID: keyID, bytes: $0), userID: row.userID, clientID: row.clientID) } == row.access)
        }
        let movedBefore = try #require(before["\(moved)/com.example.app"])
        let movedAfter = try #require(after["\(moved)/com.example.app"])
        #expect(movedAfter.0 == "old" && movedAfter.1 == movedBefore.1 && movedAfter.2 == nil)

        // Without the bad row, a second run has nothing left to do.
        try await database.withClient { client in
            try await client.query("DELETE FROM siwa.apple_tokens WHERE user_id = \(moved)", logger: TestEnvironment.logger)
        }
        let again = try await runSIWA(["tokens", "rekey"], environment: environment)
        #expect(again.status == 0, "\(again.output)")
        #expect(again.output.contains("re-encrypted: 0") && again.output.contains("already current: 4"), "\(again.output)")
    }

    /// A sign-in that rewrites a row while rekey runs is not overwritten
    /// with the stale token rekey read before it: rekey's batch waits for
    /// the row's lock and then reads what the sign-in wrote.
    @Test func aTokenRewrittenDuringRekeyIsNotOverwrittenWithTheStaleOne() async throws {
        let database = try await TestDatabase.create()
        let old = try TokenKeyRingTests.ring("old")
        let rotated = try TokenKeyRingTests.ring("new", "old")
        let ringFile = try TokenKeyRingTests.write(["new", "old"].map { "\($0):\(TokenKeyRingTests.keys[$0]!.base64EncodedString())" }
            .joined(separator: "\n"))
        defer { try? FileManager.default.removeItem(atPath: ringFile) }
        let runtime = try database.runtimeConfiguration

        let run = try await TestDatabase.withClient(runtime) { client -> ProcessResult in
            let user = try await Self.insertUser(client, sub: "rekey.race")
            let stale = try old.seal("r.before", userID: user, clientID: "com.example.app")
            try await Self.store(client, userID: user, clientID: "com.example.app", keyID: "old", refresh: stale.bytes, access: nil)
            return try await client.withConnection { signIn in
                // The sign-in's transaction holds the row, its new token not yet committed.
                try await signIn.query("BEGIN", logger: TestEnvironment.logger)
                let fresh = try rotated.seal("r.after", userID: user, clientID: "com.example.app")
                try await signIn.query("""
                    UPDATE siwa.apple_tokens SET key_id = \(fresh.keyID), refresh_token = \(fresh.bytes)
                    WHERE user_id = \(user) AND client_id = 'com.example.app'
                    """, logger: TestEnvironment.logger)
                let rekey = Task {
                    try await runSIWA(["tokens", "rekey"], environment: ["SIWA_DATABASE_URL": database.workerURL, "SIWA_TOKEN_ENCRYPTION_KEYS_FILE": ringFile])
                }
                let waited = try await eventually(upTo: .seconds(30)) {
                    try await database.scalar("""
                        SELECT count(*) FROM pg_locks
                        WHERE NOT granted AND pid IN (SELECT pid FROM pg_stat_activity WHERE datname = current_database())
                        """) > 0
                }
                try await signIn.query("COMMIT", logger: TestEnvironment.logger)
                #expect(waited, "rekey never waited for the sign-in's lock")
                return try await rekey.value
            }
        }
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("re-encrypted: 0") && run.output.contains("already current: 1"), "\(run.output)")
        let rows = try await Self.stored(database)
        let (keyID, refresh, _) = try #require(rows.values.first)
        let user = try #require(rows.keys.first.flatMap { Int64($0.split(separator: "/")[0]) })
        #expect(try rotated.open(SealedToken(keyID: keyID, bytes: refresh), userID: user, clientID: "com.example.app") == "r.after")
    }

    @Test func rekeyWithoutAUsableRingStopsWithOneLine() async throws {
        let database = try await TestDatabase.create()
        let missing = try await runSIWA(["tokens", "rekey"], environment: ["SIWA_DATABASE_URL": database.workerURL])
        #expect(missing.status == 2 && missing.output.contains("SIWA_TOKEN_ENCRYPTION_KEYS_FILE: is required"), "\(missing.output)")

        let bad = try TokenKeyRingTests.write("k1:\(TokenKeyRingTests.short)\n", mode: 0o644)
        defer { try? FileManager.default.removeItem(atPath: bad) }
        let refused = try await runSIWA(["tokens", "rekey"], environment: ["SIWA_DATABASE_URL": database.workerURL, "SIWA_TOKEN_ENCRYPTION_KEYS_FILE": bad])
        #expect(refused.status == 2, "\(refused.output)")
        #expect(refused.output.contains("\(bad) line 1: key 'k1' is 31 bytes"), "\(refused.output)")
        #expect(!refused.output.contains(TokenKeyRingTests.short))
        #expect(refused.output.split(separator: "\n").count == 1, "\(refused.output)")
    }

    @Test func aRingFileOthersCanReadIsWarnedAbout() async throws {
        let database = try await TestDatabase.create()
        let file = try TokenKeyRingTests.write("new:\(TokenKeyRingTests.keys["new"]!.base64EncodedString())\n", mode: 0o644)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let run = try await runSIWA(["tokens", "rekey"], environment: ["SIWA_DATABASE_URL": database.workerURL, "SIWA_TOKEN_ENCRYPTION_KEYS_FILE": file])
        #expect(run.status == 0, "\(run.output)")
        #expect(run.output.contains("siwa: warning: SIWA_TOKEN_ENCRYPTION_KEYS_FILE: \(file) is readable by others"), "\(run.output)")
        #expect(run.output.contains("re-encrypted: 0") && run.output.contains("already current: 0"), "\(run.output)")
    }
}
