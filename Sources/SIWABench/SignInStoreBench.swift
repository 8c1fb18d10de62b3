import AccountStore
import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// Issue 20 §5's question, measured: does sign-in's store gain from
/// batching concurrent sign-ins (SignInStore, RoundTripBatcher) over a
/// plain transaction per sign-in? Both in this process on one client (the
/// serve role, serve's pool size), for new users, at each concurrency:
/// - batched: the production `SignInStore` (prepare, seal, store), and the
///   same with 8 store lanes instead of its 2 (more batches in flight,
///   smaller ones: whether lanes, not batching, are what low concurrency needs);
/// - plain: the same two SQL functions (`siwa.sign_in_prepare`,
///   `siwa.sign_in`), one prepared statement each per sign-in, each its own
///   transaction, with the same sealing.
/// Rounds alternate the three; figures are sign-ins/s, this
/// process's CPU per sign-in (the store's cost: no HTTP, no Apple) and
/// PostgreSQL's CPU per sign-in.
enum SignInStoreBench {
    struct Figures {
        var rates: [Double] = []
        var cpu: [Double] = []
        var postgresCPU: [Double] = []
    }

    static func run(serverURL: String, concurrencies: [Int], rounds: Int, perRound: Int, logger: Logger) async throws {
        let database = try await BenchDatabase.create(serverURL: serverURL, label: "signinstore")
        do {
            try await measure(database, concurrencies: concurrencies, rounds: rounds, perRound: perRound, logger: logger)
        } catch {
            await database.drop()
            throw error
        }
        await database.drop()
    }

    private static func measure(_ database: BenchDatabase, concurrencies: [Int], rounds: Int, perRound: Int,
                                logger: Logger) async throws {
        // serve's pool: SIWA_DATABASE_MAX_CONNECTIONS' default.
        let configuration = try DatabaseConfiguration(url: database.serveURL, maximumConnections: 20)
        let keyRing = try TokenKeyRing(keys: [(id: "bench1", bytes: Data((0..<32).map { _ in UInt8.random(in: 0...255) }))])
        try await configuration.withClient { client in
            // The production store, and the same with as many store lanes as
            // the lower concurrency (more round trips in flight, smaller batches).
            let store = SignInStore(client: client, validationPeriodHours: 24, logger: logger)
            var wide = SignInStore.defaultBatching
            wide.lanes = 8
            let wideStore = SignInStore(client: client, validationPeriodHours: 24, batching: wide, logger: logger)
            let variants: [(name: String, store: SignInStore?)] = [("batched", store), ("8 lanes", wideStore), ("plain", nil)]
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await store.run() }
                group.addTask { await wideStore.run() }
                defer {
                    store.close()
                    wideStore.close()
                }
                var serial = 0
                // Warm-up: connections open, statements prepared, on each path.
                for variant in variants {
                    serial += 1
                    _ = try await round(serial: serial, count: 500, concurrency: 64, store: variant.store, client: client,
                                        keyRing: keyRing, database: database, logger: logger)
                }
                say("")
                say("== sign-in store: batched (SignInStore; with 2 store lanes, its default, and with 8) against a plain transaction per sign-in (same SQL functions), new users, \(perRound) per round, rounds alternating")
                for concurrency in concurrencies {
                    var figures = Array(repeating: Figures(), count: variants.count)
                    for _ in 0..<rounds {
                        for (index, variant) in variants.enumerated() {
                            serial += 1
                            let (rate, cpu, pg) = try await round(serial: serial, count: perRound, concurrency: concurrency,
                                                                  store: variant.store, client: client, keyRing: keyRing,
                                                                  database: database, logger: logger)
                            figures[index].rates.append(rate)
                            figures[index].cpu.append(cpu)
                            figures[index].postgresCPU.append(pg)
                        }
                    }
                    for (index, variant) in variants.enumerated() {
                        let f = figures[index]
                        say(String(format: "%d concurrent, %-7@ median %5.0f sign-ins/s   store CPU %4.0f µs   PostgreSQL CPU %4.0f µs per sign-in   (rates: %@; CPU: %@)",
                                   concurrency, variant.name, median(f.rates), median(f.cpu), median(f.postgresCPU),
                                   f.rates.map { String(format: "%.0f", $0) }.joined(separator: ", "),
                                   f.cpu.map { String(format: "%.0f", $0) }.joined(separator: ", ")))
                    }
                    let plain = figures[variants.count - 1]
                    for (index, variant) in variants.enumerated().dropLast() {
                        let rateRatios = zip(figures[index].rates, plain.rates).map { $0 / $1 }
                        let cpuRatios = zip(figures[index].cpu, plain.cpu).map { $0 / $1 }
                        say(String(format: "%d concurrent, %@ / plain: rate %.2f, store CPU %.2f (medians of same-round ratios; batching is kept only where it wins by more than 20%%)",
                                   concurrency, variant.name, median(rateRatios), median(cpuRatios)))
                    }
                }
            }
        }
    }

    /// One round of `count` new users' sign-ins at `concurrency`; returns
    /// sign-ins/s, this process's CPU µs per sign-in and PostgreSQL's.
    /// `store` nil: the plain path.
    private static func round(serial: Int, count: Int, concurrency: Int, store: SignInStore?, client: PostgresClient,
                              keyRing: TokenKeyRing, database: BenchDatabase, logger: Logger) async throws -> (Double, Double, Double) {
        let next = Counter()
        let postgresBefore = try await PostgresCost.read(database)
        let cpuBefore = processCPUSeconds(getpid())
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    while let index = next.take(below: count) {
                        let record = Self.record(sub: "store-\(serial)-\(index)")
                        let seal = Self.sealer(keyRing, clientID: record.clientID)
                        let stored = if let store { try await Self.batchedSignIn(record, seal: seal, store: store) } else {
                            try await Self.plainSignIn(record, seal: seal, client: client, logger: logger)
                        }
                        guard stored else { throw BenchError("a bench sign-in was not stored") }
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = ContinuousClock.now - start
        let cpu = processCPUSeconds(getpid()) - cpuBefore
        let postgres = postgresBefore.cost(to: try await PostgresCost.read(database), per: count)
        let seconds = elapsed / .seconds(1)
        return (Double(count) / seconds, cpu / Double(count) * 1e6, postgres.cpuSeconds * 1e6)
    }

    static func record(sub: String) -> SignInRecord {
        SignInRecord(appleSub: sub, appleTeam: SignInCredentials.teamID, clientID: "com.example.siwa.bench", email: "\(sub)@privaterelay.appleid.com", isPrivateEmail: true,
                     givenName: nil, familyName: nil, realUserStatus: 2, signedInAt: Date(),
                     codeSHA256: Data("code-of-\(sub)".utf8), apiKeyName: "bench")
    }

    /// Seals stand-in tokens for a user id, as SignInService does Apple's.
    static func sealer(_ keyRing: TokenKeyRing, clientID: String) -> @Sendable (Int64) throws -> SealedTokenPair {
        { userID in
            let refresh = try keyRing.seal("r.bench-refresh-token-of-sixty-four-characters-or-so-as-apple-sends", userID: userID,
                                           clientID: clientID)
            let access = try keyRing.seal("a.bench-access-token-of-sixty-four-characters-or-so-as-apple-sends", userID: userID,
                                          clientID: clientID)
            return SealedTokenPair(keyID: refresh.keyID, refreshToken: refresh.bytes, accessToken: access.bytes, accessExpiresIn: 3600)
        }
    }

    static func batchedSignIn(_ record: SignInRecord, seal: @escaping @Sendable (Int64) throws -> SealedTokenPair,
                              store: SignInStore) async throws -> Bool {
        for _ in 0..<3 {
            let prepared = try await store.prepare(appleSub: record.appleSub, team: record.appleTeam, codeSHA256: record.codeSHA256)
            switch try await store.store(record, prepared: prepared, seal: seal) {
            case .stored: return true
            case .again: continue
            default: return false
            }
        }
        return false
    }

    static func plainSignIn(_ record: SignInRecord, seal: @Sendable (Int64) throws -> SealedTokenPair, client: PostgresClient,
                            logger: Logger) async throws -> Bool {
        for _ in 0..<3 {
            guard let prepared = try await client.guardedExecute(PlainPrepare(sub: record.appleSub, team: record.appleTeam, code: record.codeSHA256),
                                                                 logger: logger).first else { return false }
            let statement = PlainSignIn(record: record, currentID: prepared.0, freshID: prepared.1,
                                        forCurrent: try prepared.0.map(seal), forFresh: try seal(prepared.1))
            switch try await client.guardedExecute(statement, logger: logger).first {
            case "stored": return true
            case "again": continue
            default: return false
            }
        }
        return false
    }

    struct PlainPrepare: PostgresPreparedStatement {
        static let sql = "SELECT current_id, fresh_id FROM siwa.sign_in_prepare($1, $2, $3, $4)"
        typealias Row = (Int64?, Int64)
        let sub: String
        let team: String
        let code: Data?

        func makeBindings() -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 4)
            bindings.append(sub)
            bindings.append(team)
            bindings.append(code.map { ByteBuffer(bytes: $0) })
            bindings.append(Int32(SignInStore.replayWindowSeconds))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    struct PlainSignIn: PostgresPreparedStatement {
        static let sql = """
            SELECT outcome FROM siwa.sign_in($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
                                             $20, $21, $22, $23)
            """
        typealias Row = String
        let record: SignInRecord
        let currentID: Int64?
        let freshID: Int64
        let forCurrent: SealedTokenPair?
        let forFresh: SealedTokenPair?

        func makeBindings() -> PostgresBindings {
            func bytes(_ data: Data?) -> ByteBuffer? { data.map { ByteBuffer(bytes: $0) } }
            let sealed = forFresh ?? forCurrent
            var bindings = PostgresBindings(capacity: 23)
            bindings.append(record.appleSub)
            bindings.append(record.appleTeam)
            bindings.append(currentID)
            bindings.append(freshID)
            bindings.append(record.clientID)
            bindings.append(record.email)
            bindings.append(record.isPrivateEmail)
            bindings.append(record.givenName)
            bindings.append(record.familyName)
            bindings.append(record.realUserStatus.map(Int16.init))
            bindings.append(Int64((record.signedInAt.timeIntervalSince1970 * 1000).rounded()))
            bindings.append(bytes(record.codeSHA256))
            bindings.append(record.apiKeyName)
            bindings.append(sealed?.keyID)
            bindings.append(bytes(forCurrent?.refreshToken))
            bindings.append(bytes(forCurrent?.accessToken))
            bindings.append(bytes(forFresh?.refreshToken))
            bindings.append(bytes(forFresh?.accessToken))
            bindings.append(Int32(clamping: sealed?.accessExpiresIn ?? 0))
            bindings.append(Int32(24))
            bindings.append(record.emailVerified)
            bindings.append(record.orgID)
            bindings.append(record.transferSub)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(String.self) }
    }

    /// Hands out 0, 1, 2, ... below a bound, to the round's tasks.
    final class Counter: Sendable {
        private let value = Mutex(0)

        func take(below bound: Int) -> Int? {
            value.withLock { value in
                guard value < bound else { return nil }
                defer { value += 1 }
                return value
            }
        }
    }
}
