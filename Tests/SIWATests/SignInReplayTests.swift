import AccountStore
import Foundation
import Testing

/// The earlier answer to a retried sign-in has one lookup
/// (siwa.sign_in_replay): `prepare`, before Apple is called, and `replay`,
/// after Apple refused the code as used, find the same answer within the
/// window and none past it.
@Suite("Sign-in replay", .testDatabases)
struct SignInReplayTests {
    @Test func prepareAndReplayFindTheSameAnswerWithinTheWindowOnly() async throws {
        let db = try await TestDatabase.create()
        try await db.execute("""
            INSERT INTO siwa.sign_in_codes (code_sha256, user_id, apple_sub, is_new_user, refresh_token_stored, created_at)
            VALUES ('\\x01', 7, 'replayed', true, true, now() - interval '9 minutes'),
                   ('\\x02', 8, 'expired', false, true, now() - interval '11 minutes')
            """)
        try await TestDatabase.withClient(db.serveConfiguration) { client in
            let store = SignInStore(client: client, validationPeriodHours: 24, logger: TestEnvironment.logger)
            try await SignInStoreTests.running(store) {
                let recent = try await store.replay(codeSHA256: Data([1]))
                #expect(recent?.userID == 7 && recent?.appleSub == "replayed" && recent?.isNewUser == true && recent?.refreshTokenStored == true)
                #expect(try await store.prepare(appleSub: "replayed", team: TestEnvironment.team, codeSHA256: Data([1])).replay == recent)
                #expect(try await store.replay(codeSHA256: Data([2])) == nil)
                #expect(try await store.prepare(appleSub: "expired", team: TestEnvironment.team, codeSHA256: Data([2])).replay == nil)
                #expect(try await store.replay(codeSHA256: Data([3])) == nil)
            }
        }
    }

    /// The worker's pruning (SignInCodePruner's pass, as the worker's role)
    /// forgets the codes past the window and keeps those within it.
    @Test func theWorkerForgetsCodesPastTheWindowOnly() async throws {
        let db = try await TestDatabase.create()
        try await db.execute("""
            INSERT INTO siwa.sign_in_codes (code_sha256, user_id, apple_sub, is_new_user, refresh_token_stored, created_at)
            VALUES ('\\x01', 7, 'recent', true, true, now() - interval '9 minutes'),
                   ('\\x02', 8, 'expired', false, true, now() - interval '11 minutes')
            """)
        let pruned = try await TestDatabase.withClient(try db.workerConfiguration) { client in
            try await SignInCodes(client: client, logger: TestEnvironment.logger).prune()
        }
        #expect(pruned == 1)
        #expect(try await db.strings("SELECT apple_sub FROM siwa.sign_in_codes") == ["recent"])
    }
}
