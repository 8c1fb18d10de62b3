import AccountStore
import AppleSimulator
import Foundation
import PostgresNIO
import Testing

/// The audit log's hash chain (sql/009_audit_chain.sql, AuditChain.swift):
/// every writer (two `siwa serve`, two `siwa worker`, an admin's `siwa jobs
/// retry`) ends up in one chain that `siwa audit verify` accepts; then each
/// kind of tampering a superuser can do is named by the first seq it breaks.
@Suite("Audit chain", .testDatabases, .timeLimit(.minutes(10)))
struct AuditChainTests {
    static let admin = "siwa_chain_admin"
    static let auditor = "siwa_chain_auditor"

    @Test func aMixedWorkloadMakesOneChainAndEveryTamperingIsFound() async throws {
        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        let database = harness.database
        // An auditor of their own (a name no other suite uses); the admin is made by the workload.
        let auditorURL = try await APIKeysTests.loginURL(Self.auditor, in: "siwa_auditor", for: database)
        try await Self.runMixedWorkload(harness)

        let total = try await database.scalar("SELECT count(*) FROM siwa.audit_log")
        // `queue`: the job.enqueued rows of sql/010's trigger.
        #expect(try await database.strings("SELECT DISTINCT actor FROM siwa.audit_log ORDER BY 1") == ["admin", "apple", "queue", "worker"])

        // The auditor's own role verifies it, and reads the same head `siwa audit head` prints.
        let head = try await runSIWA(["audit", "head"], environment: ["SIWA_DATABASE_URL": auditorURL])
        #expect(head.status == 0, "\(head.output)")
        let recorded = try #require(AuditChainLink(head.output), "\(head.output)")
        let verified = try await Self.verify(database)
        #expect(verified.status == 0, "\(verified.output)")
        #expect(verified.output == "ok: \(total) rows, head \(recorded.seq) \(recorded.hashHex)\n", "\(verified.output)")
        // A worker logs the head at start, at notice (production's level
        // may be above info), as SEQ:HASH for `verify --head`.
        let logging = try harness.startWorker(["SIWA_LOG_LEVEL": "notice"])
        try await logging.waitForLog("Audit chain head")
        #expect(await logging.terminate() == 0)
        #expect(logging.log.contains("head=\(recorded.description)"), "\(logging.log.suffix(2000))")

        // Tampering, as the superuser with the log's triggers off. Each case
        // is undone from a copy before the next, and verify is ok again.
        try await Self.asSuperuser(database) { try await Self.run($0, "CREATE TABLE public.log_copy AS SELECT * FROM siwa.audit_log; "
                                                                   + "CREATE TABLE public.chain_copy AS SELECT * FROM siwa.audit_chain") }
        // ORDER BY the column, not the text output of the same name ("27" < "270" < "28").
        let seqs = try await database.strings("SELECT seq::text FROM siwa.audit_log ORDER BY audit_log.seq").compactMap { Int64($0) }
        let middle = seqs[seqs.count / 2], next = seqs[seqs.count / 2 + 1]

        try await Self.tamper(database, "UPDATE siwa.audit_log SET details = details || '{\"job_id\": 0}' WHERE seq = \(middle)",
                              breaksAt: middle, because: "its contents do not match its row_hash")
        try await Self.tamper(database, "UPDATE siwa.audit_log SET actor = 'someone else' WHERE seq = \(middle)",
                              breaksAt: middle, because: "its contents do not match its row_hash")
        try await Self.tamper(database, "DELETE FROM siwa.audit_log WHERE seq = \(middle)",
                              breaksAt: middle, because: "sealed, but missing from siwa.audit_log")
        try await Self.tamper(database, "DELETE FROM siwa.audit_log WHERE seq = \(middle); DELETE FROM siwa.audit_chain WHERE seq = \(middle)",
                              breaksAt: next, because: "its prev_hash is not the row_hash of seq")
        try await Self.tamper(database, """
            UPDATE siwa.audit_log AS a SET occurred_at = b.occurred_at, actor = b.actor, action = b.action,
                                           apple_sub = b.apple_sub, details = b.details
            FROM public.log_copy AS b WHERE (a.seq, b.seq) IN ((\(middle), \(next)), (\(next), \(middle)))
            """, breaksAt: middle, because: "its contents do not match its row_hash")

        // A tail cut below the recorded head: the rest of the chain is
        // whole, so only the head kept elsewhere shows what is missing.
        let cut = "DELETE FROM siwa.audit_log WHERE seq > \(middle); DELETE FROM siwa.audit_chain WHERE seq > \(middle)"
        try await Self.tamper(database, cut, head: recorded, breaksAt: recorded.seq,
                              because: "the recorded head is not in the chain, which ends at seq \(middle)") {
            let alone = try await Self.verify(database)
            #expect(alone.status == 0 && alone.output.hasPrefix("ok: "), "\(alone.output)")
        }

        // The whole chain rewritten from an edit on (what a superuser can
        // do): it verifies on its own, but not against the head kept elsewhere.
        try await Self.tamper(database, """
            UPDATE siwa.audit_log SET actor = 'someone else' WHERE seq = \(middle);
            DELETE FROM siwa.audit_chain WHERE seq >= \(middle)
            """, head: recorded, breaksAt: recorded.seq, because: "its row_hash is not the recorded head's") {
            let sealer = try await database.withClient { client in
                try await eventually { try await AuditSealer(client: client, logger: TestEnvironment.logger).seal() > 0 }
            }
            #expect(sealer)
            let alone = try await Self.verify(database)
            #expect(alone.status == 0 && alone.output.hasPrefix("ok: \(total) rows,"), "\(alone.output)")
        }
    }

    /// A row whose transaction commits late, below rows already committed,
    /// is never skipped: nothing past it is sealed until it commits, then
    /// all of them in seq order. A rolled-back row leaves a gap, which is fine.
    @Test func aLateCommitIsWaitedForAndGapsAreFine() async throws {
        let database = try await TestDatabase.create()
        let runtime = try database.workerConfiguration
        try await TestDatabase.withClient(runtime) { client in
            let sealer = AuditSealer(client: client, logger: TestEnvironment.logger)
            try await Self.appendRows(client, count: 3, action: "test.before")
            #expect(try await eventually {
                let sealed = try await sealer.seal()
                let left = try await Self.unsealed(database)
                return sealed == 0 && left == 0
            })

            try await client.withConnection { late in
                try await late.query("BEGIN", logger: TestEnvironment.logger)
                try await late.query("INSERT INTO siwa.audit_log (actor, action) VALUES ('test', 'test.late')", logger: TestEnvironment.logger)
                try await Self.appendRows(client, count: 250, action: "test.after")
                // A rolled-back row: its seq is a gap forever.
                try await client.withConnection { gone in
                    try await gone.query("BEGIN", logger: TestEnvironment.logger)
                    try await gone.query("INSERT INTO siwa.audit_log (actor, action) VALUES ('test', 'test.gone')", logger: TestEnvironment.logger)
                    try await gone.query("ROLLBACK", logger: TestEnvironment.logger)
                }
                for _ in 0..<3 { #expect(try await sealer.seal() == 0) }
                #expect(try await Self.unsealed(database) == 250)
                try await late.query("COMMIT", logger: TestEnvironment.logger)
            }
            // A backlog bigger than a batch: sealed over several calls.
            var sealed: [Int] = []
            #expect(try await eventually {
                let count = try await sealer.seal(maxRows: 100)
                if count > 0 { sealed.append(count) }
                return try await Self.unsealed(database) == 0
            })
            #expect(sealed == [100, 100, 51])
        }
        #expect(try await database.strings("SELECT action FROM siwa.audit_log l JOIN siwa.audit_chain c USING (seq) ORDER BY c.seq LIMIT 1 OFFSET 3")
                == ["test.late"])
        let report = try await database.withClient { client in
            try await AuditChainVerifier(client: client, logger: TestEnvironment.logger).verify()
        }
        #expect(report.failure == nil, "\(String(describing: report.failure))")
        #expect(report.sealed == 254 && report.unsealed == 0)
        // The worker's walk is paced: 254 seqs in pages of 100 at 500 a
        // second wait 0.2 s after each of the first two pages.
        let clock = ContinuousClock()
        var paced: AuditChainReport?
        let took = try await clock.measure {
            paced = try await database.withClient { client in
                try await AuditChainVerifier(client: client, logger: TestEnvironment.logger, pageRows: 100).verify(rowsPerSecond: 500)
            }
        }
        #expect(paced?.failure == nil && paced?.sealed == 254 && paced?.unsealed == 0)
        #expect(took >= .milliseconds(400), "\(took)")
    }

    /// Only this database's audit writers hold sealing back: a transaction
    /// left open in another database of the cluster, or one here that
    /// writes elsewhere and only reads the log, does not; a writer of the
    /// log that is still open does.
    @Test func onlyThisDatabasesAuditWritersHoldSealingBack() async throws {
        let database = try await TestDatabase.create()
        let elsewhere = try await TestDatabase.create()
        try await TestDatabase.withClient(try database.workerConfiguration) { client in
            let sealer = AuditSealer(client: client, logger: TestEnvironment.logger)
            try await elsewhere.withClient { other in
                try await other.withConnection { open in
                    // An old transaction with an id, open in another database.
                    try await open.query("BEGIN", logger: TestEnvironment.logger)
                    try await open.query("CREATE TABLE held (x int)", logger: TestEnvironment.logger)
                    try await database.withClient { owner in
                        try await owner.withConnection { reader in
                            // Here: a transaction with an id that reads the log and writes elsewhere.
                            try await reader.query("BEGIN", logger: TestEnvironment.logger)
                            try await reader.query("SELECT count(*) FROM siwa.audit_log", logger: TestEnvironment.logger)
                            try await reader.query("CREATE TABLE public.reader_held (x int)", logger: TestEnvironment.logger)
                            try await Self.appendRows(client, count: 5, action: "test.sealed")
                            #expect(try await eventually(upTo: .seconds(10)) {
                                _ = try await sealer.seal()
                                return try await Self.unsealed(database) == 0
                            }, "sealed while the other transactions stay open")

                            // A writer of the log left open here does hold it back.
                            try await client.withConnection { writer in
                                try await writer.query("BEGIN", logger: TestEnvironment.logger)
                                try await writer.query("INSERT INTO siwa.audit_log (actor, action) VALUES ('test', 'test.open')",
                                                       logger: TestEnvironment.logger)
                                try await Self.appendRows(client, count: 3, action: "test.waiting")
                                for _ in 0..<3 {
                                    _ = try await sealer.seal()
                                    try await Task.sleep(for: .milliseconds(100))
                                }
                                #expect(try await Self.unsealed(database) == 3)
                                try await writer.query("COMMIT", logger: TestEnvironment.logger)
                            }
                            #expect(try await eventually(upTo: .seconds(10)) {
                                _ = try await sealer.seal()
                                return try await Self.unsealed(database) == 0
                            })
                            try await reader.query("ROLLBACK", logger: TestEnvironment.logger)
                        }
                    }
                    try await open.query("ROLLBACK", logger: TestEnvironment.logger)
                }
            }
        }
    }

    /// An existing installation: the rows written before the chain existed
    /// are sealed first, and seqs go on from the last one.
    @Test func rowsWrittenBeforeTheUpgradeAreSealedToo() async throws {
        let sql = TestEnvironment.repositoryRoot.appendingPathComponent("sql")
        let before = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-sql-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: before, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: before) }
        for file in try FileManager.default.contentsOfDirectory(atPath: sql.path) where file < "009" {
            try FileManager.default.copyItem(at: sql.appendingPathComponent(file), to: before.appendingPathComponent(file))
        }
        let configuration = try await MigrationTests.emptyDatabase()
        try await TestDatabase.withClient(configuration) { client in
            try await Migrator(directory: before).migrate(client: client, logger: TestEnvironment.logger)
            try await Self.appendRows(client, count: 40, action: "test.old", team: nil)
            let upgrade = try Migrator(directory: sql)
            #expect(try await upgrade.migrate(client: client, logger: TestEnvironment.logger)
                        == upgrade.migrations.filter { $0.version >= 9 }.map(\.name))
            try await Self.appendRows(client, count: 10, action: "test.new")
            let sealer = AuditSealer(client: client, logger: TestEnvironment.logger)
            var sealed = 0
            #expect(try await eventually {
                sealed += try await sealer.seal()
                return sealed == 50
            })
            let report = try await AuditChainVerifier(client: client, logger: TestEnvironment.logger).verify()
            #expect(report.failure == nil && report.sealed == 50 && report.head?.seq == 50, "\(report)")
        }
    }

    /// `siwa audit verify --head` takes SEQ:HASH or a signed head's file:
    /// anything else is one line and exit status 2, as for the other
    /// `siwa audit` arguments.
    @Test func aMalformedHeadIsRefused() async throws {
        for head in ["12", "12:abc", "x:" + String(repeating: "0", count: 64), "0:" + String(repeating: "0", count: 64),
                     "5:" + String(repeating: "g", count: 64)] {
            #expect(AuditChainLink(head) == nil, "\(head)")
            let result = try await runSIWA(["audit", "verify", "--head", head], environment: ["SIWA_DATABASE_URL": "postgres://nobody@127.0.0.1:1/x"])
            #expect(result.status == 2, "\(result.output)")
            #expect(result.output == "siwa: audit: --head must be SEQ:HASH (a seq, a colon, 64 hex digits), as `siwa audit head` prints it, "
                        + "or a file holding a signed head (`siwa audit head --signed`), got '\(head)'\n")
        }
        let link = try #require(AuditChainLink("7:" + String(repeating: "ab", count: 32)))
        #expect(link.seq == 7 && link.hash == [UInt8](repeating: 0xab, count: 32) && link.description == "7:" + String(repeating: "ab", count: 32))
    }

    // MARK: Helpers

    /// Notifications to two `siwa serve` processes at once (deletions among
    /// them, purged by two `siwa worker` processes), and an admin's retry of
    /// a discarded purge with `siwa jobs retry` as a member of siwa_admin.
    static func runMixedWorkload(_ harness: WorkerHarness) async throws {
        let apple = try AppleSimulator()
        let appleServer = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await appleServer.stop() }
        let subs = (0..<30).map { "chain.\($0)" }
        let serves = try (0..<2).map { _ in
            try SIWAProcess(port: try freePort(), environment: [
                "SIWA_DATABASE_URL": harness.database.serveURL, "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
                "SIWA_APPLE_JWKS_URL": appleServer.baseURL + "/auth/keys", "SIWA_LOG_LEVEL": "warning",
            ])
        }
        let workers = try (0..<2).map { _ in try harness.startWorker() }
        for serve in serves { try await serve.waitUntilReady() }

        let discarded = try await JobsAuditTests.discardedJob(in: harness.database, sub: "chain.retried")
        let types = ["email-disabled", "email-enabled", "consent-revoked", "account-deleted"]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, sub) in subs.enumerated() {
                group.addTask {
                    for (step, type) in types.enumerated() {
                        let token = try apple.notification(type: type, sub: sub, audience: ServerHarness.clientID, jti: "chain-\(index)-\(step)",
                                                           eventTime: Date().addingTimeInterval(Double(step)))
                        let url = "http://127.0.0.1:\(serves[(index + step) % 2].port)/apple/notifications"
                        let answer = try await HTTPAnswer.send(method: .POST, url: url, body: AppleSimulator.body(for: token), headers: [])
                        #expect(answer.status == 200)
                    }
                }
            }
            try await group.waitForAll()
        }
        let adminURL = try await APIKeysTests.loginURL(admin, in: "siwa_admin", for: harness.database)
        let retry = try await runSIWA(["jobs", "retry", String(discarded)], environment: ["SIWA_DATABASE_URL": adminURL])
        #expect(retry.status == 0, "\(retry.output)")

        #expect(try await harness.wait { try await harness.count(state: "completed") == subs.count + 1 })
        for serve in serves { #expect(await serve.terminate() == 0) }
        // Everything written is sealed by the workers within seconds.
        #expect(try await eventually(upTo: .seconds(60)) { try await Self.unsealed(harness.database) == 0 })
        for worker in workers { #expect(await worker.terminate() == 0) }
    }

    /// Runs `statements` as the superuser with triggers off, checks that
    /// `siwa audit verify` (as the auditor) names `seq` and `reason`, runs
    /// `then`, and puts both tables back from the copies.
    static func tamper(_ database: TestDatabase, _ statements: String, head: AuditChainLink? = nil, breaksAt seq: Int64,
                       because reason: String, then: () async throws -> Void = {}) async throws {
        try await asSuperuser(database) { try await run($0, statements) }
        try await then()
        let result = try await verify(database, head: head)
        #expect(result.status == 1, "\(statements): \(result.output)")
        #expect(result.output.hasPrefix("broken at seq \(seq): \(reason)"), "\(statements): \(result.output)")
        // The walk reads the log in pages: with pages of two and of three
        // seqs, a page boundary falls on each side of every tampered row,
        // and the break is still the same.
        for pageRows in [2, 3] {
            let paged = try await database.withClient { client in
                try await AuditChainVerifier(client: client, logger: TestEnvironment.logger, pageRows: pageRows).verify(expectedHead: head)
            }
            #expect(paged.failure?.seq == seq && paged.failure?.reason.hasPrefix(reason) == true,
                    "pages of \(pageRows), \(statements): \(String(describing: paged.failure))")
        }
        try await asSuperuser(database) {
            try await run($0, """
                DELETE FROM siwa.audit_log; INSERT INTO siwa.audit_log SELECT * FROM public.log_copy;
                DELETE FROM siwa.audit_chain; INSERT INTO siwa.audit_chain SELECT * FROM public.chain_copy
                """)
        }
        let restored = try await verify(database, head: head)
        #expect(restored.status == 0, "restored after \(statements): \(restored.output)")
    }

    static func verify(_ database: TestDatabase, head: AuditChainLink? = nil) async throws -> ProcessResult {
        let url = try LeastPrivilegeTests.url(of: database.configuration, user: auditor)
        return try await runSIWA(["audit", "verify"] + (head.map { ["--head", $0.description] } ?? []),
                                 environment: ["SIWA_DATABASE_URL": url])
    }

    static func unsealed(_ database: TestDatabase) async throws -> Int {
        try await database.scalar("SELECT count(*) FROM siwa.audit_log l WHERE NOT EXISTS (SELECT FROM siwa.audit_chain c WHERE c.seq = l.seq)")
    }

    /// With no team, as a database before sql/024 holds them (the column
    /// did not exist).
    static func appendRows(_ client: PostgresClient, count: Int, action: String, team: String? = TestEnvironment.team) async throws {
        guard let team else {
            try await client.query("""
                INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
                SELECT 'test', \(action), 'sub.' || g, jsonb_build_object('n', g, 'note', 'é ✓') FROM generate_series(1, \(count)) AS g
                """, logger: TestEnvironment.logger)
            return
        }
        try await client.query("""
            INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
            SELECT 'test', \(action), 'sub.' || g, \(team), jsonb_build_object('n', g, 'note', 'é ✓') FROM generate_series(1, \(count)) AS g
            """, logger: TestEnvironment.logger)
    }

    /// The cluster's superuser on this test's database.
    static func asSuperuser(_ database: TestDatabase, _ body: (PostgresClient) async throws -> Void) async throws {
        let superuser = try database.configuration.superuser()
        try await superuser.withClient { try await body($0) }
    }

    /// `statements` with every user trigger off (session_replication_role),
    /// as a superuser tampering with the log would run them.
    static func run(_ client: PostgresClient, _ statements: String) async throws {
        try await client.withConnection { connection in
            try await connection.query("SET session_replication_role = replica", logger: TestEnvironment.logger)
            for statement in SQLScript.statements(statements) {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: TestEnvironment.logger)
            }
        }
    }
}
