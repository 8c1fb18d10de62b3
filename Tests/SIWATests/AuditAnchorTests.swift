import AccountLifecycle
import AccountStore
import AppleSignIn
import Crypto
import Foundation
import PostgresNIO
import Testing

/// The chain anchored outside the database: `siwa audit head --signed`,
/// the worker's signed_head, and `siwa audit verify --head FILE` against an
/// owner who rewrites rows and recomputes every hash; and the encoding's
/// version 2, which covers the stamped `db_user`.
@Suite("Audit anchor", .testDatabases, .timeLimit(.minutes(10)))
struct AuditAnchorTests {
    static let auditor = "siwa_anchor_auditor"

    /// Seals everything written so far, as a worker would.
    static func sealAll(_ database: TestDatabase, as configuration: DatabaseConfiguration) async throws {
        let sealed = try await TestDatabase.withClient(configuration) { client in
            let sealer = AuditSealer(client: client, logger: TestEnvironment.logger)
            return try await eventually {
                _ = try await sealer.seal()
                return try await AuditChainTests.unsealed(database) == 0
            }
        }
        #expect(sealed)
    }

    /// `siwa audit verify` as the auditor.
    static func verify(_ url: String) async throws -> ProcessResult {
        try await runSIWA(["audit", "verify"], environment: ["SIWA_DATABASE_URL": url])
    }

    /// The last line of a command's output.
    static func lastLine(_ output: String) -> String {
        output.split(separator: "\n").last.map(String.init) ?? ""
    }

    @Test func aSignedHeadCatchesAChainTheOwnerRewroteAndResealed() async throws {
        let keys = try await ReceiptFixture.make()
        let harness = try await WorkerHarness.start(settings: keys.workerSettings.merging(["SIWA_LOG_LEVEL": "notice"]) { $1 })
        try atTestEnd { await harness.stop(); keys.remove() }
        let database = harness.database
        let auditorURL = try await APIKeysTests.loginURL(Self.auditor, in: "siwa_auditor", for: database)
        try await TestDatabase.withClient(try database.runtimeConfiguration) { client in
            try await AuditChainTests.appendRows(client, count: 20, action: "test.anchor")
        }
        try await Self.sealAll(database, as: try database.runtimeConfiguration)
        let plain = try #require(AuditChainLink(Self.lastLine(try await runSIWA(["audit", "head"], environment: ["SIWA_DATABASE_URL": auditorURL]).output)))
        let publicKeys = try ES256KeySet.load(path: keys.jwksFile)

        // The head signed by the command, with the receipt key.
        let signed = try await runSIWA(["audit", "head", "--signed"], environment: keys.workerSettings.merging(["SIWA_DATABASE_URL": auditorURL]) { $1 })
        #expect(signed.status == 0, "\(signed.output)")
        let jws = Self.lastLine(signed.output)
        let (head, keyID) = try SignedAuditHead.verify(jws, keys: publicKeys)
        #expect(head.link == plain && head.iss == ReceiptFixture.issuer && keyID == publicKeys.entries.first?.keyID, "\(head)")
        let headFile = keys.directory.appendingPathComponent("head.jws").path
        try Data((jws + "\n").utf8).write(to: URL(fileURLWithPath: headFile))

        // ...and by the worker, in the line it logs the head with.
        let worker = try harness.startWorker()
        try await worker.waitForLog("signed_head=")
        #expect(await worker.terminate() == 0)
        let logged = try #require(worker.log.firstMatch(of: /signed_head=([A-Za-z0-9_.-]+)/)?.1, "\(worker.log.suffix(2000))")
        #expect(try SignedAuditHead.verify(String(logged), keys: publicKeys).head.link == plain)

        let verifyEnvironment = ["SIWA_DATABASE_URL": auditorURL, "SIWA_RECEIPT_JWKS_FILE": keys.jwksFile]
        let good = try await runSIWA(["audit", "verify", "--head", headFile], environment: verifyEnvironment)
        #expect(good.status == 0, "\(good.output)")
        #expect(good.output.contains("signed head: seq \(plain.seq)") && good.output.contains("recorded head \(plain.seq) in the chain"),
                "\(good.output)")

        // A head signed by any other key is refused before the chain is read.
        let stranger = DeletionReceiptSigner(key: P256.Signing.PrivateKey(), issuer: ReceiptFixture.issuer)
        let forgedFile = keys.directory.appendingPathComponent("forged.jws").path
        try Data(try stranger.sign(head: plain, sealedAt: Date()).utf8).write(to: URL(fileURLWithPath: forgedFile))
        let forged = try await runSIWA(["audit", "verify", "--head", forgedFile], environment: verifyEnvironment)
        #expect(forged.status == 1 && forged.output.contains("is not a valid signed head: kid") && forged.output.contains("not in the key set"),
                "\(forged.output)")

        // Version 2 of the encoding covers db_user: changing or clearing it breaks the chain.
        let third = try await database.strings("SELECT seq::text FROM siwa.audit_log ORDER BY audit_log.seq OFFSET 2 LIMIT 1").first ?? "0"
        for edit in ["'someone else'", "NULL"] {
            try await AuditChainTests.asSuperuser(database) {
                try await AuditChainTests.run($0, "UPDATE siwa.audit_log SET db_user = \(edit) WHERE seq = \(third)")
            }
            let broken = try await Self.verify(auditorURL)
            #expect(broken.status == 1 && broken.output.hasPrefix("broken at seq \(third): its contents do not match its row_hash"),
                    "\(edit): \(broken.output)")
        }
        try await AuditChainTests.asSuperuser(database) {
            try await AuditChainTests.run($0, "UPDATE siwa.audit_log SET db_user = '\(TestDatabase.runtimeRole)' WHERE seq = \(third)")
        }
        #expect(try await Self.verify(auditorURL).status == 0)

        // The owner's rewrite: a row edited with the triggers off, the chain
        // and the seal mark emptied, everything sealed again. The chain
        // holds on its own; the head exported before does not.
        try await AuditChainTests.asSuperuser(database) {
            try await AuditChainTests.run($0, """
                UPDATE siwa.audit_log SET details = details || '{"n": -1}' WHERE seq = \(third);
                DELETE FROM siwa.audit_chain; DELETE FROM siwa.audit_seal_mark
                """)
        }
        try await Self.sealAll(database, as: database.configuration)
        let alone = try await Self.verify(auditorURL)
        let total = try await database.scalar("SELECT count(*) FROM siwa.audit_log")
        #expect(alone.status == 0 && alone.output.hasPrefix("ok: \(total) rows"), "\(alone.output)")
        let rewritten = try await runSIWA(["audit", "verify", "--head", headFile], environment: verifyEnvironment)
        #expect(rewritten.status == 1, "\(rewritten.output)")
        #expect(rewritten.output.contains("broken at seq \(plain.seq): its row_hash is not the recorded head's \(plain.hashHex)"),
                "\(rewritten.output)")
    }
}
