import AccountLifecycle
import AccountStore
import AppleSignIn
import Crypto
import Foundation
import PostgresNIO
import Testing

/// Erasures survive a restored backup: the worker appends every completed
/// purge to the erasure ledger (signed, synced, outside the database)
/// before it commits, and `siwa erasures reapply` purges again, after a
/// restore, every sub the restored database still holds.
@Suite("Erasure ledger", .testDatabases, .timeLimit(.minutes(10)))
struct ErasureLedgerTests {
    /// The whole procedure of deploy/README.md, "Restoring a backup", with
    /// real processes: users erased after a pg_dump come back with the
    /// restore (email, names, Apple tokens, the app's rows); reapply, run as
    /// an admin's role, refuses a tampered line, enqueues the others once
    /// (a second run enqueues nothing), and the worker erases them again,
    /// each with a new receipt.
    @Test func erasuresAreReappliedAfterARestoredBackup() async throws {
        let keys = try await ReceiptFixture.make()
        let ledger = try Self.temporaryDirectory("siwa-ledger")
        let setup = try await AccountDeletionTests.Setup.start(
            server: keys.serverSettings, worker: keys.workerSettings.merging(["SIWA_ERASURE_LEDGER_DIR": ledger.path]) { $1 })
        try atTestEnd { await setup.stop(); keys.remove(); try? FileManager.default.removeItem(at: ledger) }
        let database = setup.database
        let (kept, a, b, c) = ("016.ledger.0000", "016.ledger.0001", "016.ledger.0002", "016.ledger.0003")
        var refreshTokens: [String: String] = [:]
        for sub in [kept, a, b] { refreshTokens[sub] = try await setup.signedIn(sub).refreshToken }
        // The app's own rows: c is a sub siwa never saw (no users row).
        try await database.execute("""
            INSERT INTO app.profiles (apple_sub, display_name) VALUES ('\(kept)', 'Kept'), ('\(a)', 'Ada'), ('\(b)', 'Bob'), ('\(c)', 'Cy')
            """)

        // `kept` is erased before the backup: the dump shows it purged.
        let keptJob = try #require(try await setup.delete(kept).value?.jobId)
        var worker = try setup.worker.startWorker()
        #expect(try await setup.worker.wait { try await setup.jobState(keptJob) == ["completed"] }, "\(worker.log)")
        #expect(worker.log.contains("Erasure ledger: one signed line for each completed purge"), "\(worker.log)")
        _ = await worker.terminate()
        let dump = ledger.deletingLastPathComponent().appendingPathComponent("siwa-\(UUID().uuidString).dump").path
        try atTestEnd { try? FileManager.default.removeItem(atPath: dump) }
        try await Self.pgTool("pg_dump", ["--format=custom", "--file", dump, "--dbname", try Self.superuserURL(database.configuration)])

        // After the backup: a and b delete their accounts, c is purged by hand.
        var jobs = [try #require(try await setup.delete(a).value?.jobId), try #require(try await setup.delete(b).value?.jobId)]
        jobs.append(Int64(try await database.scalar("""
            INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', jsonb_build_object('apple_sub', '\(c)', 'apple_team', 'TEAM123456')) RETURNING id
            """)))
        worker = try setup.worker.startWorker()
        for job in jobs { #expect(try await setup.worker.wait { try await setup.jobState(job) == ["completed"] }, "\(worker.log)") }
        _ = await worker.terminate()
        let files = try Self.ledgerFiles(ledger)
        #expect(files.count == 2, "one file per worker process: \(files)")
        let lines = try files.flatMap { try String(contentsOfFile: $0, encoding: .utf8).split(separator: "\n").map(String.init) }
        #expect(lines.count == 4, "\(lines)")
        let receiptIDs = try await database.strings("SELECT apple_sub || ' ' || jti FROM siwa.deletion_receipts")
        let receiptBySub = Dictionary(uniqueKeysWithValues: receiptIDs.map { ($0.split(separator: " ")[0], String($0.split(separator: " ")[1])) })
        var ledgerSubs: [String] = []
        for line in lines {
            let entry = try ErasureLedgerLine.verify(line[...], keys: try ES256KeySet.load(path: keys.jwksFile))
            ledgerSubs.append(entry.sub)
            #expect(entry.receiptID == receiptBySub[entry.sub[...]] && entry.receiptID != nil && entry.keyID != nil, "\(line)")
            // The sub and internal ids only: no email, name or token.
            for personal in ["@", "privaterelay", "Ada", "Bob"] + Array(refreshTokens.values) { #expect(!line.contains(personal)) }
        }
        #expect(ledgerSubs.sorted() == [kept, a, b, c])
        let lineOfA = try #require(lines.first { $0.contains(#""sub":"\#(a)""#) })

        // The restore, into a new database, as the cluster's superuser.
        let server = try DatabaseConfiguration(url: try TestEnvironment.databaseURL)
        let (name, restoredOwner) = try await TestDatabase.createEmpty(on: server, prefix: "restored_")
        try await Self.pgTool("pg_restore", ["--exit-on-error", "--dbname", try Self.superuserURL(restoredOwner), dump])
        let restored = try Self.database(named: name, owner: restoredOwner)
        for sub in [a, b] {
            #expect(try await restored.scalar("SELECT count(*) FROM siwa.users WHERE apple_sub = '\(sub)' AND email IS NOT NULL AND purged_at IS NULL") == 1,
                    "the restore brought \(sub) back")
            #expect(try await restored.scalar("SELECT count(*) FROM siwa.apple_tokens AS t JOIN siwa.users AS u ON u.id = t.user_id WHERE u.apple_sub = '\(sub)'") == 1)
        }
        #expect(try await restored.scalar("SELECT count(*) FROM app.profiles") == 3)

        let admin = try await APIKeysTests.loginURL("siwa_ledger_admin", in: "siwa_admin", for: restored)
        let arguments = ["erasures", "reapply", "--jwks", keys.jwksFile] + files
        let environment = ["SIWA_DATABASE_URL": admin]

        // --dry-run decides and writes nothing.
        let dry = try await runSIWA(arguments + ["--dry-run"], environment: environment)
        #expect(dry.status == 0, "\(dry.output)")
        #expect(dry.output.contains("dry run, nothing written: 3 to re-enqueue, 0 already pending, 1 already erased, 0 already reapplied, 0 refused"),
                "\(dry.output)")
        #expect(try await restored.scalar("SELECT count(*) FROM siwa.jobs WHERE state <> 'completed'") == 0)

        // A tampered copy of a's line (another sub) is refused, the rest applied.
        let tampered = ledger.deletingLastPathComponent().appendingPathComponent("tampered-\(UUID().uuidString).jsonl").path
        try atTestEnd { try? FileManager.default.removeItem(atPath: tampered) }
        try Data((lineOfA.replacingOccurrences(of: a, with: "016.ledger.9999") + "\n").utf8).write(to: URL(fileURLWithPath: tampered))
        let first = try await runSIWA(arguments + [tampered], environment: environment)
        #expect(first.status == 1, "\(first.output)")
        #expect(first.output.contains("refused \(tampered):1: the signature does not verify"), "\(first.output)")
        #expect(first.output.contains("3 re-enqueued, 0 already pending, 1 already erased, 0 already reapplied, 1 refused"), "\(first.output)")
        for sub in [a, b, c] { #expect(first.output.contains("enqueued \(sub) job "), "\(first.output)") }
        #expect(try await restored.scalar("SELECT count(*) FROM siwa.jobs WHERE args->>'apple_sub' = '016.ledger.9999'") == 0)
        #expect(try await restored.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'erasure.reapplied' AND details->>'db_user' = 'siwa_ledger_admin'
              AND details->>'outcome' = 'enqueued' AND (details->>'job_id')::bigint IN (SELECT id FROM siwa.jobs WHERE state = 'available')
            """) == 3)

        // Idempotent: a second run enqueues nothing new.
        let second = try await runSIWA(arguments, environment: environment)
        #expect(second.status == 0, "\(second.output)")
        #expect(second.output.contains("0 re-enqueued, 0 already pending, 1 already erased, 3 already reapplied, 0 refused"), "\(second.output)")
        #expect(try await restored.scalar("SELECT count(*) FROM siwa.jobs WHERE state = 'available'") == 3)

        // The worker, against the restored database, erases them again.
        let secondLedger = try Self.temporaryDirectory("siwa-ledger-restored")
        try atTestEnd { try? FileManager.default.removeItem(at: secondLedger) }
        let restoredWorker = try setup.worker.startWorker(["SIWA_DATABASE_URL": restored.url, "SIWA_ERASURE_LEDGER_DIR": secondLedger.path])
        try atTestEnd { await restoredWorker.kill9() }
        #expect(try await setup.worker.wait {
            try await restored.scalar("SELECT count(*) FROM siwa.jobs WHERE kind = 'purge_user' AND state = 'completed'") == 4
        }, "\(restoredWorker.log)")
        for sub in [a, b] {
            #expect(try await restored.scalar("""
                SELECT count(*) FROM siwa.users WHERE apple_sub = '\(sub)' AND email IS NULL AND given_name IS NULL
                  AND family_name IS NULL AND purged_at IS NOT NULL
                """) == 1, "\(sub)'s personal data is gone again")
            #expect(try await restored.scalar("SELECT count(*) FROM siwa.apple_tokens AS t JOIN siwa.users AS u ON u.id = t.user_id WHERE u.apple_sub = '\(sub)'") == 0)
        }
        #expect(try await restored.scalar("SELECT count(*) FROM app.profiles") == 0)
        for sub in [a, b, c] {
            let receipts = try await ReceiptFixture.receipts(in: restored, sub: sub)
            let receipt = try #require(receipts.first, "\(sub) has a new receipt")
            let verified = try DeletionReceipt.verify(receipt, keys: try ES256KeySet.load(path: keys.jwksFile))
            #expect(verified.receipt.purge.event.type == "erasure-reapplied")
            #expect(verified.receipt.jti != receiptBySub[sub[...]], "a new receipt, not the lost one")
        }
        #expect(try Self.ledgerFiles(secondLedger).flatMap { try String(contentsOfFile: $0, encoding: .utf8).split(separator: "\n") }.count == 3)
    }

    /// Each line is signed over every field: a changed sub, job id, time
    /// or receipt id, another key, or a signature taken from another line
    /// is refused; an unsigned line (receipts off) is read as unsigned.
    @Test func aLedgerLineVerifiesOnlyAsWritten() throws {
        let key = P256.Signing.PrivateKey()
        let signer = ErasureLedgerSigner(key: key)
        let keys = ES256KeySet([key.publicKey])
        let record = ErasureRecord(sub: "001.line.0001", team: "TEAM123456", jobID: 42, completedAt: Date(timeIntervalSince1970: 1_767_225_600.5),
                                   receiptID: "0b7c1f2e-0000-4000-8000-000000000001")
        let line = try ErasureLedgerLine.encode(record, signer: signer)
        #expect(line.hasPrefix(#"{"completed_at":"2026-01-01T00:00:00.500Z","job_id":42,"receipt_id":"0b7c1f2e-0000-4000-8000-000000000001","sub":"001.line.0001","team":"TEAM123456","v":2,"jws":""#))
        #expect(line.hasSuffix("\"}\n") && line.filter { $0 == "\n" }.count == 1)
        let text = line.dropLast()
        let entry = try ErasureLedgerLine.verify(text, keys: keys)
        #expect(entry.sub == record.sub && entry.team == "TEAM123456" && entry.jobID == 42 && entry.receiptID == record.receiptID
                && entry.keyID == signer.keyID)

        let other = try ErasureLedgerLine.encode(ErasureRecord(sub: "001.line.0002", team: "TEAM123456", jobID: 43, completedAt: Date(), receiptID: nil),
                                                 signer: signer).dropLast()
        let otherSignature = try #require(other.split(separator: ",").last)
        for changed in [
            text.replacingOccurrences(of: "001.line.0001", with: "001.line.0009"),
            text.replacingOccurrences(of: #""job_id":42"#, with: #""job_id":41"#),
            text.replacingOccurrences(of: "00.500Z", with: "00.501Z"),
            text.replacingOccurrences(of: "TEAM123456", with: "TEAM123457"),
            text.replacingOccurrences(of: "000000000001\",\"sub", with: "000000000002\",\"sub"),
            String(text.split(separator: ",").dropLast().joined(separator: ",")) + "," + otherSignature,
        ] {
            #expect(throws: ErasureLineFailure.self, "\(changed)") { try ErasureLedgerLine.verify(changed[...], keys: keys) }
        }
        #expect(throws: ErasureLineFailure.self) {
            try ErasureLedgerLine.verify(text, keys: ES256KeySet([P256.Signing.PrivateKey().publicKey]))
        }
        #expect(throws: ErasureLineFailure("the line is signed, and no key set was given to verify it")) {
            try ErasureLedgerLine.verify(text, keys: nil)
        }
        #expect(throws: ErasureLineFailure.self) { try ErasureLedgerLine.verify("not json", keys: keys) }

        let unsigned = try ErasureLedgerLine.encode(record, signer: nil)
        #expect(!unsigned.contains("jws"))
        #expect(try ErasureLedgerLine.verify(unsigned.dropLast(), keys: keys).keyID == nil)

        // A line written before siwa knew of teams (version 1) names none;
        // a version 2 line must.
        let old = #"{"completed_at":"2026-01-01T00:00:00.500Z","job_id":7,"receipt_id":null,"sub":"001.old","v":1}"#
        let oldEntry = try ErasureLedgerLine.verify(old[...], keys: keys)
        #expect(oldEntry.sub == "001.old" && oldEntry.team == nil && oldEntry.keyID == nil)
        #expect(throws: ErasureLineFailure("a version 2 line names its team")) {
            try ErasureLedgerLine.verify(old.replacingOccurrences(of: #""v":1"#, with: #""v":2"#)[...], keys: keys)
        }
    }

    /// The ledger line is written in the transaction that completes the
    /// purge, before it commits: a ledger that cannot be written fails the
    /// completion, and nothing of the erase commits either.
    @Test func noErasureCommitsWithoutItsLedgerLine() async throws {
        let database = try await TestDatabase.create()
        try await database.execute("""
            INSERT INTO siwa.users (apple_sub, email, apple_team) VALUES ('001.durable.0001', 'x@privaterelay.appleid.com', 'TEAM123456');
            INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{"apple_sub": "001.durable.0001", "apple_team": "TEAM123456"}');
            """)
        try await database.withClient { client in
            let failing = PurgeQueue(jobs: JobQueue(client: client, worker: "test", logger: TestEnvironment.logger,
                                                    completionHooks: PurgeCompletion.hooks(receipts: nil, ledger: FailingLedger())))
            let claimed = try await failing.jobs.claim(limit: 1, kinds: ["purge_user"], leaseSeconds: 60)
            let job = try #require(claimed.first)
            await #expect(throws: ErasureLedgerError.self) {
                try await failing.erasePersonalData([(job.id, job.lease)], completes: [true])
            }
            #expect(try await database.scalar("SELECT count(*) FROM siwa.users WHERE email IS NOT NULL") == 1, "the erase rolled back")
            #expect(try await database.strings("SELECT state FROM siwa.jobs") == ["running"])

            let recording = RecordingLedger()
            let queue = PurgeQueue(jobs: JobQueue(client: client, worker: "test", logger: TestEnvironment.logger,
                                                  completionHooks: PurgeCompletion.hooks(receipts: nil, ledger: recording)))
            #expect(try await queue.erasePersonalData([(job.id, job.lease)], completes: [true]) == [job.id])
            #expect(recording.records.map(\.sub) == ["001.durable.0001"])
            #expect(recording.records.map(\.jobID) == [job.id] && recording.records.first?.receiptID == nil)
            #expect(try await database.strings("SELECT state FROM siwa.jobs") == ["completed"])
        }
    }

    /// A ledger directory the worker cannot create or write stops it at
    /// start with one line naming the setting: not at the first purge.
    @Test func aLedgerDirectoryThatCannotBeWrittenStopsTheWorkerAtStart() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-not-a-dir-\(UUID().uuidString)").path
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let database = try await TestDatabase.create()
        for (directory, expected) in [
            ("\(file)/erasures", "siwa: SIWA_ERASURE_LEDGER_DIR: \(file)/erasures: cannot create the directory (Not a directory)"),
            (file, "siwa: SIWA_ERASURE_LEDGER_DIR: \(file): exists and is not a directory"),
            ("relative/erasures", "siwa: SIWA_ERASURE_LEDGER_DIR: relative/erasures: must be an absolute path"),
        ] {
            let result = try await runSIWA(["worker"], environment: ["SIWA_DATABASE_URL": database.url, "SIWA_ERASURE_LEDGER_DIR": directory])
            #expect(result.status == 2, "\(directory): \(result.output)")
            #expect(result.output.contains(expected), "\(result.output)")
            #expect(result.output.split(separator: "\n").count == 1, "one line: \(result.output)")
        }
    }

    /// With receipts off the ledger is still written, unsigned, and the
    /// worker says so at start; reapply takes such lines only with
    /// --accept-unsigned.
    @Test func withReceiptsOffTheLinesAreUnsignedAndTakenOnlyWhenAsked() async throws {
        let ledger = try Self.temporaryDirectory("siwa-ledger-unsigned")
        let harness = try await WorkerHarness.start(planSteps: { _ in [] }, settings: ["SIWA_ERASURE_LEDGER_DIR": ledger.path])
        try atTestEnd { await harness.stop(); try? FileManager.default.removeItem(at: ledger) }
        try await harness.enqueue(subs: ["001.unsigned.0001"])
        let worker = try harness.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await harness.wait { try await harness.count(state: "completed") == 1 }, "\(worker.log)")
        #expect(worker.log.contains("Erasure ledger: lines are unsigned because deletion receipts are off"), "\(worker.log)")
        let files = try Self.ledgerFiles(ledger)
        let text = try String(contentsOfFile: try #require(files.first), encoding: .utf8)
        #expect(text.hasSuffix("\n") && !text.contains("jws") && text.contains(#""sub":"001.unsigned.0001""#), "\(text)")

        let admin = try await APIKeysTests.loginURL("siwa_ledger_admin", in: "siwa_admin", for: harness.database)
        let refused = try await runSIWA(["erasures", "reapply"] + files, environment: ["SIWA_DATABASE_URL": admin])
        #expect(refused.status == 1 && refused.output.contains(":1: unsigned"), "\(refused.output)")
        #expect(refused.output.contains("0 re-enqueued, 0 already pending, 0 already erased, 0 already reapplied, 1 refused"))
        let taken = try await runSIWA(["erasures", "reapply", "--accept-unsigned"] + files, environment: ["SIWA_DATABASE_URL": admin])
        #expect(taken.status == 0, "\(taken.output)")
        #expect(taken.output.contains("0 re-enqueued, 0 already pending, 1 already erased, 0 already reapplied, 0 refused"), "\(taken.output)")
    }

    /// Admins call the function, and no one else: PUBLIC has no EXECUTE,
    /// the runtime role neither.
    @Test func onlyAdminsMayReapply() async throws {
        let database = try await TestDatabase.create()
        let runtime = try await runSIWA(["erasures", "reapply", "--accept-unsigned", try Self.unsignedLedgerFile()],
                                        environment: ["SIWA_DATABASE_URL": database.url])
        #expect(runtime.status == 1 && runtime.output.contains("permission denied"), "\(runtime.output)")
        #expect(try await database.scalar("SELECT count(*) FROM siwa.jobs") == 0)
    }

    // MARK: helpers

    final class FailingLedger: ErasureLedgerWriting {
        func append(_ records: [ErasureRecord]) throws { throw ErasureLedgerError("/nowhere: cannot append (No space left on device)") }
    }

    final class RecordingLedger: ErasureLedgerWriting {
        private let recorded = Locked<[ErasureRecord]>([])
        var records: [ErasureRecord] { recorded.withLock { $0 } }
        func append(_ records: [ErasureRecord]) throws { recorded.withLock { $0.append(contentsOf: records) } }
    }

    static func unsignedLedgerFile() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-unsigned-\(UUID().uuidString).jsonl").path
        let line = try ErasureLedgerLine.encode(ErasureRecord(sub: "001.nobody.0001", team: TestEnvironment.team, jobID: 1, completedAt: Date(), receiptID: nil), signer: nil)
        try Data(line.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    static func temporaryDirectory(_ prefix: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static func ledgerFiles(_ directory: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".jsonl") }.sorted()
            .map { directory.appendingPathComponent($0).path }
    }

    static func superuserURL(_ configuration: DatabaseConfiguration) throws -> String {
        "postgres://postgres@\(configuration.host):\(configuration.port)/\(configuration.database)?sslmode=disable"
    }

    /// A restored database as the tests use one: the owner's configuration,
    /// the runtime role's URL (the roles are the cluster's, so the dump's
    /// grants hold).
    static func database(named name: String, owner: DatabaseConfiguration) throws -> TestDatabase {
        let base = try TestEnvironment.databaseURL
        guard var components = URLComponents(string: base) else { throw TestSetupError("\(base) is not a URL") }
        components.path = "/\(name)"
        let ownerURL = components.string ?? base
        components.user = TestDatabase.runtimeRole
        components.password = TestDatabase.runtimeRole
        return TestDatabase(url: components.string ?? base, ownerURL: ownerURL, configuration: owner)
    }

    /// pg_dump or pg_restore of the cluster's PostgreSQL version (as pgDump finds it).
    static func pgTool(_ tool: String, _ arguments: [String]) async throws {
        let installed = ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .compactMap(Int.init).sorted().last.map { "/usr/lib/postgresql/\($0)/bin" }
        let bin = ProcessInfo.processInfo.environment["SIWA_PG_BIN"] ?? installed ?? "/usr/lib/postgresql/15/bin"
        let result = try await runToCompletion(bin + "/" + tool, arguments, environment: ["PGSSLMODE": "disable"])
        guard result.status == 0 else { throw TestSetupError("\(tool) failed: \(result.output.prefix(500))") }
    }
}
