import AccountLifecycle
import AccountStore
import AppleSignIn
import Crypto
import Foundation
import JWTKit
import PostgresNIO
import Testing

/// Deletion receipts end to end: a real `siwa worker` signs one when a
/// purge completes, siwa serve publishes the key set, and the receipt is
/// checked by jwt-kit and openssl (no code shared with siwa's verifier) and
/// by `siwa receipts verify`.
@Suite("Deletion receipts", .testDatabases, .timeLimit(.minutes(10)))
struct DeletionReceiptTests {
    struct ReceiptClaims: JWTPayload {
        let iss: IssuerClaim
        let sub: SubjectClaim
        let jti: IDClaim
        let iat: IssuedAtClaim

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    static func start(server: [String: String] = [:]) async throws -> (setup: AccountDeletionTests.Setup, keys: ReceiptFixture) {
        let keys = try await ReceiptFixture.make()
        let setup = try await AccountDeletionTests.Setup.start(server: keys.serverSettings.merging(server) { $1 },
                                                               worker: keys.workerSettings)
        return (setup, keys)
    }

    /// Seconds since 1970 of a receipt's time (ISO 8601, milliseconds, Z).
    static func seconds(_ value: Any?) throws -> Double {
        let text = try #require(value as? String)
        #expect(text.hasSuffix("Z") && text.count == 24, "\(text)")
        return try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text).timeIntervalSince1970
    }

    @Test func aCompletedPurgeHasAReceiptThatVerifiesAndSaysWhatWasDone() async throws {
        let (setup, keys) = try await Self.start()
        try atTestEnd { await setup.stop(); keys.remove() }
        let sub = "011.receipt.0001"
        let (_, refreshToken) = try await setup.signedIn(sub)
        let started = Date().timeIntervalSince1970.rounded(.down)
        let jobID = try #require(try await setup.delete(sub).value?.jobId)
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait { try await setup.jobState(jobID) == ["completed"] }, "\(worker.log)")
        #expect(worker.log.contains("Deletion receipts: one signed for each completed purge"), "\(worker.log)")

        let receipts = try await ReceiptFixture.receipts(in: setup.database, sub: sub)
        let receipt = try #require(receipts.first)
        #expect(receipts.count == 1)

        // The key set as siwa serve publishes it verifies the receipt in jwt-kit.
        let published = try await setup.signIn.server.get("/.well-known/siwa-receipts.json")
        #expect(published.status == 200 && published.headers["Cache-Control"].first == "public, max-age=3600", "\(published.text)")
        let jwtKeys = try await JWTKeyCollection().add(jwksJSON: published.text)
        let verified = try await jwtKeys.verify(receipt, as: ReceiptClaims.self)
        #expect(verified.iss.value == ReceiptFixture.issuer && verified.sub.value == sub)
        let others = try await JWTKeyCollection().add(jwksJSON: String(decoding: ES256KeySet([P256.Signing.PrivateKey().publicKey]).json(), as: UTF8.self))
        await #expect(throws: (any Error).self) { try await others.verify(receipt, as: ReceiptClaims.self) }

        // openssl verifies it with the public key openssl derived from the
        // key file, which is the key the published set holds.
        let (header, claims, input, signature) = try ClientSecretTests.segments(receipt)
        let openssl = try await OpenSSL.run(["dgst", "-sha256", "-verify", "receipt-pub.pem", "-signature", "sig.der", "input"],
                                            in: try Self.write(input: input, signature: signature, to: keys.directory))
        #expect(openssl.status == 0 && openssl.output.contains("Verified OK"), "\(openssl.output)")
        let tamperedInput = try await OpenSSL.run(["dgst", "-sha256", "-verify", "receipt-pub.pem", "-signature", "sig.der", "input"],
                                                  in: try Self.write(input: input + "x", signature: signature, to: keys.directory))
        #expect(tamperedInput.status != 0 && !tamperedInput.output.contains("Verified OK"))
        let publicKey = try P256.Signing.PublicKey(pemRepresentation: keys.publicKeyPEM)
        let jwk = try #require((published.json["keys"] as? [[String: Any]])?.first)
        #expect(Base64URL.decode(try #require(jwk["x"] as? String)) == publicKey.rawRepresentation.prefix(32))
        #expect(Base64URL.decode(try #require(jwk["y"] as? String)) == publicKey.rawRepresentation.suffix(32))
        let kid = try #require(jwk["kid"] as? String)
        #expect(String(decoding: header, as: UTF8.self) == #"{"alg":"ES256","kid":"\#(kid)","typ":"siwa-deletion-receipt+jwt"}"#)

        // The claims, against what the database recorded.
        #expect(Set(claims.keys) == ["iss", "sub", "team", "client_id", "jti", "iat", "purge"])
        #expect(claims["team"] as? String == TestEnvironment.team && claims["client_id"] as? String == ServerHarness.clientID)
        #expect(claims["jti"] as? String == (try await setup.database.strings("SELECT jti FROM siwa.deletion_receipts")).first)
        let iat = try #require((claims["iat"] as? NSNumber)?.doubleValue)
        #expect(iat >= started && iat <= Date().timeIntervalSince1970)
        let purge = try #require(claims["purge"] as? [String: Any])
        #expect((purge["job_id"] as? Int).map(Int64.init) == jobID)
        let event = try #require(purge["event"] as? [String: Any])
        #expect(event["type"] as? String == "app-deletion")
        let requested = try Self.seconds(purge["requested_at"])
        let completed = try Self.seconds(purge["completed_at"])
        #expect(abs(try Self.seconds(event["time"]) - requested) < 1)
        let recorded = try await setup.database.strings("""
            SELECT extract(epoch FROM created_at)::text || ' ' || extract(epoch FROM finalized_at)::text FROM siwa.jobs WHERE id = \(jobID)
            """).first?.split(separator: " ").compactMap { Double($0) } ?? []
        #expect(recorded.count == 2 && abs(recorded[0] - requested) < 0.001 && abs(recorded[1] - completed) < 0.001, "\(recorded)")
        let steps = try #require(purge["steps"] as? [[String: Any]])
        #expect(steps.compactMap { $0["name"] as? String }
                == [AppleTokenStore.revokeStepName, PurgePlan.builtInStepName, WorkerHarness.sqlStep, WorkerHarness.httpStep])
        let stepTimes = try steps.map { try Self.seconds($0["completed_at"]) }
        #expect(stepTimes == stepTimes.sorted() && stepTimes.last == completed && stepTimes[0] >= requested)
        let revocation = try #require(purge["apple_token_revocation"] as? [String: Any])
        #expect(revocation["outcome"] as? String == "revoked")
        #expect((revocation["tokens"] as? [[String: Any]])?.map { "\($0["client_id"] ?? "")=\($0["apple_status"] ?? "")" }
                == ["\(SignInTests.client)=200"], "\(revocation)")

        // Nothing personal in it: no email, no name, no token.
        let text = String(decoding: try #require(Base64URL.decode(receipt.split(separator: ".")[1])), as: UTF8.self)
        for secret in ["@", "privaterelay", "Ada", refreshToken] { #expect(!text.contains(secret), "\(secret): \(text)") }
        #expect(try await setup.database.scalar(
            "SELECT count(*) FROM siwa.audit_log WHERE action = 'receipt.issued' AND apple_sub = '\(sub)' AND details->>'kid' = '\(kid)'") == 1)

        // siwa receipts verify: the receipt as it is, and with one changed byte.
        let file = keys.directory.appendingPathComponent("receipt.jws").path
        try Data((receipt + "\n").utf8).write(to: URL(fileURLWithPath: file))
        let ok = try await runSIWA(["receipts", "verify", file, "--jwks", keys.jwksFile, "--issuer", ReceiptFixture.issuer])
        #expect(ok.status == 0 && ok.output.hasPrefix("ok: signed with key \(kid)\n") && ok.output.contains(sub), "\(ok.output)")
        for (segment, offset) in [(1, 40), (2, 20), (0, 10)] {
            let tampered = ReceiptFixture.tampered(receipt, segment: segment, offset: offset)
            try Data(tampered.utf8).write(to: URL(fileURLWithPath: file))
            let refused = try await runSIWA(["receipts", "verify", file, "--jwks", keys.jwksFile])
            #expect(refused.status == 1 && refused.output.hasPrefix("refused: "), "segment \(segment): \(refused.output)")
        }
    }

    /// `siwa receipts show` for a person in `siwa_auditor` (the
    /// superuser makes the login, as deploy/README.md has it).
    @Test func anAuditorReadsAUsersReceiptsWithSiwaReceiptsShow() async throws {
        let keys = try await ReceiptFixture.make()
        let harness = try await WorkerHarness.start(planSteps: { _ in [] }, settings: keys.workerSettings)
        try atTestEnd { await harness.stop(); keys.remove() }
        let sub = "011.show.0001"
        try await harness.enqueue(subs: [sub])
        let worker = try harness.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await harness.wait { try await harness.count(state: "completed") == 1 }, "\(worker.log)")
        let receipt = try #require(try await ReceiptFixture.receipts(in: harness.database, sub: sub).first)
        let kid = try ES256KeySet.load(path: keys.jwksFile).entries.first?.keyID ?? ""

        let auditor = "siwa_test_receipts"
        try await JobsAuditTests.asSuperuser { client in
            try await client.query(PostgresQuery(unsafeSQL: """
                DO $$
                BEGIN
                  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '\(auditor)') THEN
                    CREATE ROLE \(auditor) LOGIN PASSWORD '\(auditor)' IN ROLE siwa_auditor;
                  END IF;
                END $$
                """), logger: TestEnvironment.logger)
        }
        let url = try LeastPrivilegeTests.url(of: harness.database.configuration, user: auditor)
        let json = try await runSIWA(["receipts", "show", sub, "--json"], environment: ["SIWA_DATABASE_URL": url])
        #expect(json.status == 0 && json.output == #"{"receipts":["\#(receipt)"]}"# + "\n", "\(json.output)")
        let readable = try await runSIWA(["receipts", "show", sub], environment: ["SIWA_DATABASE_URL": url, "SIWA_RECEIPT_JWKS_FILE": keys.jwksFile])
        #expect(readable.status == 0 && readable.output.contains("signature: ok (key \(kid))"), "\(readable.output)")
        #expect(readable.output.contains(receipt) && readable.output.contains(sub), "\(readable.output)")
        let none = try await runSIWA(["receipts", "show", "011.nobody", "--json"], environment: ["SIWA_DATABASE_URL": url])
        #expect(none.status == 0 && none.output == #"{"receipts":[]}"# + "\n", "\(none.output)")
    }

    /// The openssl inputs: the signing input and the DER signature.
    static func write(input: String, signature: Data, to directory: URL) throws -> URL {
        try Data(input.utf8).write(to: directory.appendingPathComponent("input"))
        try OpenSSL.derSignature(rawRS: signature).write(to: directory.appendingPathComponent("sig.der"))
        return directory
    }

    /// Purges of users without tokens, enqueued by hand and run by the
    /// built-in step alone (the worker's batch path): a receipt each,
    /// "none_stored", no event; a second purge of a user adds a second
    /// receipt, listed first.
    @Test func batchPurgesEachGetAReceiptNewestFirst() async throws {
        let keys = try await ReceiptFixture.make()
        let harness = try await WorkerHarness.start(planSteps: { _ in [] }, settings: keys.workerSettings)
        try atTestEnd { await harness.stop(); keys.remove() }
        let subs = (1...6).map { "011.batch.000\($0)" }
        try await harness.enqueue(subs: subs)
        let worker = try harness.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await harness.wait { try await harness.count(state: "completed") == subs.count }, "\(worker.log)")
        #expect(try await harness.database.scalar("SELECT count(*) FROM siwa.deletion_receipts") == subs.count)
        let keySet = try ES256KeySet.load(path: keys.jwksFile)
        for sub in subs {
            let receipts = try await ReceiptFixture.receipts(in: harness.database, sub: sub)
            #expect(receipts.count == 1, "\(sub)")
            let receipt = try DeletionReceipt.verify(try #require(receipts.first), keys: keySet, issuer: ReceiptFixture.issuer).receipt
            #expect(receipt.sub == sub && receipt.purge.steps.map(\.name) == [PurgePlan.builtInStepName])
            #expect(receipt.purge.event == DeletionReceipt.Event(type: nil, time: nil))
            #expect(receipt.purge.appleTokenRevocation == DeletionReceipt.Revocation(outcome: "none_stored", tokens: [], forgottenClientIDs: []))
        }

        try await harness.database.execute("INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{\"apple_sub\": \"\(subs[0])\", \"apple_team\": \"TEAM123456\"}')")
        #expect(try await harness.wait { try await harness.count(state: "completed") == subs.count + 1 }, "\(worker.log)")
        let both = try await ReceiptFixture.receipts(in: harness.database, sub: subs[0])
        let jobIDs = try both.map { try DeletionReceipt.verify($0, keys: keySet).receipt.purge.jobID }
        #expect(jobIDs.count == 2 && jobIDs[0] > jobIDs[1], "newest first: \(jobIDs)")
    }

    /// consent-revoked under `sign_out` revokes the tokens in a job of its
    /// own that is no purge: no receipt, with receipts on.
    @Test func aTokenOnlySignOutHasNoReceipt() async throws {
        let (setup, keys) = try await Self.start(server: ["SIWA_ON_CONSENT_REVOKED": "sign_out"])
        try atTestEnd { await setup.stop(); keys.remove() }
        let sub = "011.signout.0001"
        _ = try await setup.signedIn(sub)
        #expect(try await setup.signIn.server.post(token: try setup.signIn.server.notification("consent-revoked", sub: sub)).status == 200)
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await setup.worker.wait {
            try await setup.database.scalar("SELECT count(*) FROM siwa.jobs WHERE state = 'completed' AND args->>'scope' = 'tokens'") == 1
        }, "\(worker.log)")
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.apple_tokens") == 0)
        #expect(worker.log.contains("Deletion receipts: one signed"), "receipts are on: \(worker.log)")
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.deletion_receipts") == 0)
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action = 'receipt.issued'") == 0)
    }
}
