import AccountStore
import Foundation
import PostgresNIO
import Testing

/// Sign-in's store makes concurrent sign-ins' calls as one round trip
/// (RoundTripBatcher): each sign-in still gets its own answer, NULLs and
/// bytes arrive intact, two sign-ins of one user in one batch do not both
/// insert, one bad sign-in does not fail the others of its batch, and a
/// caller who stops waiting is told whether its call was sent.
@Suite("Sign-in store batches", .testDatabases)
struct SignInStoreTests {
    /// `body` with `store` running, closed after it however it ends.
    static func running<T: Sendable>(_ store: SignInStore, _ body: () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await store.run() }
            defer { store.close() }
            return try await body()
        }
    }

    /// A store on `client` (sign-ins queued together in one of `lanes` go
    /// as one batch), whose callers give up after `timeout`.
    static func store(_ client: PostgresClient, lanes: Int, timeout: Duration) -> SignInStore {
        var batching = RoundTripBatching()
        batching.lanes = lanes
        batching.timeout = timeout
        return SignInStore(client: client, validationPeriodHours: 24, batching: batching, logger: TestEnvironment.logger)
    }

    static func record(_ sub: String, email: String? = nil, code: Data? = nil) -> SignInRecord {
        SignInRecord(appleSub: sub, appleTeam: TestEnvironment.team, clientID: "com.example.app", email: email, isPrivateEmail: email.map { _ in true },
                     givenName: nil, familyName: nil, realUserStatus: nil, signedInAt: Date(timeIntervalSince1970: 1_700_000_000),
                     codeSHA256: code, apiKeyName: "tests")
    }

    /// Stand-in sealed tokens whose bytes name the user id they were made for.
    static let seal: @Sendable (Int64) throws -> SealedTokenPair = { userID in
        SealedTokenPair(keyID: "k1", refreshToken: Data("refresh-\(userID)".utf8), accessToken: nil, accessExpiresIn: 3600)
    }

    @Test func manyConcurrentSignInsAreEachStoredWithTheirOwnAnswer() async throws {
        let db = try await TestDatabase.create()
        let count = 300
        let (outcomes, batches) = try await TestDatabase.withClient(db.serveConfiguration) { client in
            let store = Self.store(client, lanes: 2, timeout: .seconds(120))  // a loaded machine runs the whole suite at once
            return try await Self.running(store) {
                try await withThrowingTaskGroup(of: (String, SignInStoreOutcome).self) { group in
                    for index in 0..<count {
                        group.addTask {
                            // Every other one without an email: NULLs in the batch's arrays.
                            let record = Self.record("batch-\(index)", email: index % 2 == 0 ? "u\(index)@privaterelay.appleid.com" : nil,
                                                     code: Data("code-\(index)".utf8))
                            let prepared = try await store.prepare(appleSub: record.appleSub, team: record.appleTeam, codeSHA256: record.codeSHA256)
                            #expect(prepared.currentID == nil && prepared.replay == nil)
                            return (record.appleSub, try await store.store(record, prepared: prepared, seal: Self.seal))
                        }
                    }
                    return (try await group.reduce(into: [String: SignInStoreOutcome]()) { $0[$1.0] = $1.1 }, store.storeBatches)
                }
            }
        }
        #expect(outcomes.count == count)
        // Batched for real (some batch held more than one), and no batch failed.
        #expect(batches.failed == 0 && batches.signIns == count && batches.sent < count, "\(batches)")
        for index in 0..<count {
            guard case .stored(let userID, let isNew, let profile)? = outcomes["batch-\(index)"] else {
                Issue.record("batch-\(index): \(String(describing: outcomes["batch-\(index)"]))")
                continue
            }
            #expect(isNew)
            #expect(profile.email == (index % 2 == 0 ? "u\(index)@privaterelay.appleid.com" : nil))
            #expect(profile.isPrivateEmail == (index % 2 == 0 ? true : nil))
            // The answer is this user's row, and its token was sealed for it.
            #expect(try await db.strings("""
                SELECT u.apple_sub || '/' || convert_from(t.refresh_token, 'UTF8') FROM siwa.users u
                JOIN siwa.apple_tokens t ON t.user_id = u.id WHERE u.id = \(userID)
                """) == ["batch-\(index)/refresh-\(userID)"])
        }
        #expect(try await db.scalar("SELECT count(DISTINCT id) FROM siwa.users") == Int64(count))
        #expect(try await db.scalar("SELECT count(*) FROM siwa.sign_in_codes") == Int64(count))
        #expect(try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'user.signed_in'") == Int64(count))
    }

    /// `pending` sign-ins queued while the lane is held up (a lock on the
    /// user `holder`), sent as one batch once the lock goes.
    static func oneBatch(_ store: SignInStore, _ db: TestDatabase, holder: SignInStore.Prepared,
                         _ pending: [(String, SignInStore.Prepared)]) async throws -> [Result<SignInStoreOutcome, any Error>] {
        try await OpenConnection.with(db.serveConfiguration) { blocker in
            try await blocker.run("BEGIN")
            try await blocker.run("SELECT FROM siwa.users WHERE apple_sub = 'holder' FOR UPDATE")
            let held = Task { try await store.store(Self.record("holder"), prepared: holder, seal: nil) }
            #expect(try await eventually(upTo: .seconds(10)) { try await InboxConcurrencyTests.waitingForALock(db) })
            let queued = pending.map { sub, prepared in
                Task { () -> Result<SignInStoreOutcome, any Error> in
                    do { return .success(try await store.store(Self.record(sub), prepared: prepared, seal: nil)) } catch {
                        return .failure(error)
                    }
                }
            }
            // All queued behind the held batch, so that they go as one.
            #expect(try await eventually(upTo: .seconds(30)) { store.storesQueued == pending.count }, "\(store.storesQueued) queued")
            try await blocker.run("COMMIT")
            _ = try await held.value
            var results: [Result<SignInStoreOutcome, any Error>] = []
            for task in queued { results.append(await task.value) }
            return results
        }
    }

    /// Two first sign-ins of one user in one batch store one account (the
    /// second answers `again`, and the service prepares again), beside
    /// another user's: the batch does not fail. Then a batch with a
    /// sign-in whose statement fails (its fresh id was taken meanwhile):
    /// the batch fails, and each is retried alone, so only that one fails.
    @Test func oneBatchKeepsEachSignInApart() async throws {
        let db = try await TestDatabase.create()
        try await db.execute("INSERT INTO siwa.users (id, apple_sub, apple_team) VALUES (999999, 'holder', 'TEAM123456')")
        try await TestDatabase.withClient(db.serveConfiguration) { client in
            let store = Self.store(client, lanes: 1, timeout: .seconds(120))
            try await Self.running(store) {
                let holder = try await store.prepare(appleSub: "holder", team: TestEnvironment.team, codeSHA256: nil)
                let twins = try await Self.oneBatch(store, db, holder: holder, [
                    ("twin", try await store.prepare(appleSub: "twin", team: TestEnvironment.team, codeSHA256: nil)),
                    ("twin", try await store.prepare(appleSub: "twin", team: TestEnvironment.team, codeSHA256: nil)),
                    ("other", try await store.prepare(appleSub: "other", team: TestEnvironment.team, codeSHA256: nil)),
                ])
                let stored = twins.compactMap { try? $0.get() }
                #expect(stored.count == 3, "\(twins)")
                #expect(stored.filter { if case .stored(_, true, _) = $0 { true } else { false } }.count == 2)  // a twin and other
                #expect(stored.filter { $0 == SignInStoreOutcome.again }.count == 1)
                #expect(store.storeBatches.failed == 0 && store.storeBatches.sent == 2, "\(store.storeBatches)")  // holder's, then the three

                // Its fresh id is taken by another user meanwhile: its INSERT fails.
                let bad = try await store.prepare(appleSub: "bad", team: TestEnvironment.team, codeSHA256: nil)
                try await db.execute("INSERT INTO siwa.users (id, apple_sub, apple_team) VALUES (\(bad.freshID), 'taken', 'TEAM123456')")
                let holderAgain = try await store.prepare(appleSub: "holder", team: TestEnvironment.team, codeSHA256: nil)
                let mixed = try await Self.oneBatch(store, db, holder: holderAgain, [
                    ("good", try await store.prepare(appleSub: "good", team: TestEnvironment.team, codeSHA256: nil)), ("bad", bad),
                ])
                #expect(store.storeBatches.failed == 1 && store.storeBatches.sent == 4, "\(store.storeBatches)")
                if case .success(.stored(_, true, _)) = mixed[0] {} else { Issue.record("good: \(mixed[0])") }
                guard case .failure(let error) = mixed[1], error is SignInNotStored else {
                    Issue.record("bad: \(mixed[1])")
                    return
                }
            }
        }
        #expect(try await db.strings("SELECT apple_sub FROM siwa.users ORDER BY apple_sub") == ["good", "holder", "other", "taken", "twin"])
    }

    /// A batch sent, whose callers then stopped waiting (told their call may
    /// have been stored), and which then failed: each sign-in is still run
    /// alone, so "may have been stored" comes true for all but the bad one,
    /// and a retry by the backend would find its answer.
    @Test func aFailedBatchIsRetriedAloneEvenAfterItsCallersGaveUp() async throws {
        let db = try await TestDatabase.create()
        try await db.execute("INSERT INTO siwa.users (id, apple_sub, apple_team) VALUES (999999, 'holder', 'TEAM123456'), (999998, 'good', 'TEAM123456')")
        try await TestDatabase.withClient(db.serveConfiguration) { client in
            let store = Self.store(client, lanes: 1, timeout: .seconds(3))
            try await Self.running(store) {
                let holder = try await store.prepare(appleSub: "holder", team: TestEnvironment.team, codeSHA256: nil)
                let good = try await store.prepare(appleSub: "good", team: TestEnvironment.team, codeSHA256: nil)
                let bad = try await store.prepare(appleSub: "bad", team: TestEnvironment.team, codeSHA256: nil)
                try await db.execute("INSERT INTO siwa.users (id, apple_sub, apple_team) VALUES (\(bad.freshID), 'taken', 'TEAM123456')")
                try await OpenConnection.with(db.serveConfiguration) { goodLock in
                    try await goodLock.run("BEGIN")
                    try await goodLock.run("SELECT FROM siwa.users WHERE apple_sub = 'good' FOR UPDATE")
                    // good and bad queue behind holder's batch, then go as one batch, held on good's lock.
                    let results = try await Self.oneBatch(store, db, holder: holder, [("good", good), ("bad", bad)])
                    for result in results {
                        guard case .failure(let error) = result, (error as? RoundTripTimedOut)?.sent == true else {
                            Issue.record("expected a timeout after sending: \(result)")
                            continue
                        }
                    }
                    try await goodLock.run("COMMIT")
                }
                // The batch fails on bad's taken id and is retried alone: good is stored.
                #expect(try await eventually(upTo: .seconds(10)) {
                    try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'user.signed_in' AND apple_sub = 'good'") == 1
                })
                #expect(store.storeBatches.failed == 1, "\(store.storeBatches)")
            }
        }
        #expect(try await db.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = 'bad'") == 0)
    }

    /// A caller whose batch does not answer in time gets RoundTripTimedOut,
    /// saying it was sent (it may commit later); one still queued behind it
    /// is told it was not, and is never sent.
    @Test func aCallerPastItsTimeoutKnowsWhetherItWasSent() async throws {
        let db = try await TestDatabase.create()
        try await db.execute("INSERT INTO siwa.users (id, apple_sub, apple_team) VALUES (999999, 'holder', 'TEAM123456')")
        try await TestDatabase.withClient(db.serveConfiguration) { client in
            let store = Self.store(client, lanes: 1, timeout: .seconds(2))
            try await Self.running(store) {
                try await OpenConnection.with(db.serveConfiguration) { blocker in
                    try await blocker.run("BEGIN")
                    try await blocker.run("SELECT FROM siwa.users WHERE apple_sub = 'holder' FOR UPDATE")
                    let holder = try await store.prepare(appleSub: "holder", team: TestEnvironment.team, codeSHA256: nil)
                    let later = try await store.prepare(appleSub: "later", team: TestEnvironment.team, codeSHA256: nil)
                    let held = Task { try await store.store(Self.record("holder"), prepared: holder, seal: nil) }
                    #expect(try await eventually(upTo: .seconds(10)) { try await InboxConcurrencyTests.waitingForALock(db) })
                    let queued = Task { try await store.store(Self.record("later"), prepared: later, seal: nil) }
                    // Sent: the outcome is unknown (a RoundTripTimedOut as such).
                    await #expect { _ = try await held.value } throws: { ($0 as? RoundTripTimedOut)?.sent == true }
                    // Never sent: certainly not stored.
                    await #expect { _ = try await queued.value } throws: {
                        (($0 as? SignInNotStored)?.cause as? RoundTripTimedOut)?.sent == false
                    }
                    try await blocker.run("COMMIT")
                }
            }
        }
        // The held sign-in committed after its caller gave up; the queued one never ran.
        #expect(try await eventually(upTo: .seconds(10)) {
            try await db.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'user.signed_in' AND apple_sub = 'holder'") == 1
        })
        #expect(try await db.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = 'later'") == 0)
    }
}
