import AccountLifecycle
import AccountStore
import AppleSignIn
import Crypto
import Foundation
import SIWAConfiguration
import SIWAServer
import Testing

/// The receipt key's life outside the worker: `siwa receipts keygen` and
/// `jwks`, the settings (both or neither, a bad file refused in one line
/// with exit 2), and the public key set route of siwa serve.
@Suite("Deletion receipt keys", .testDatabases, .timeLimit(.minutes(10)))
struct ReceiptKeyTests {
    @Test func keygenPrintsAKeyThatLoadsAndJWKSNamesItByItsThumbprint() async throws {
        let directory = try OpenSSL.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try await runSIWA(["receipts", "keygen"])
        let second = try await runSIWA(["receipts", "keygen"])
        #expect(first.status == 0 && first.output.hasPrefix("-----BEGIN PRIVATE KEY-----\n"), "\(first.output)")
        #expect(first.output.hasSuffix("-----END PRIVATE KEY-----\n") && first.output != second.output)
        let keyFile = directory.appendingPathComponent("key.pem").path
        try Data(first.output.utf8).write(to: URL(fileURLWithPath: keyFile))
        let signer = try DeletionReceiptSigner.load(keyFile: keyFile, issuer: "x")
        let key = try P256.Signing.PrivateKey(pemRepresentation: first.output)

        // RFC 7638, computed here from openssl's view of the key.
        let der = try await OpenSSL.run(["pkey", "-in", "key.pem", "-pubout", "-outform", "DER", "-out", "pub.der"], in: directory)
        try #require(der.status == 0, "\(der.output)")
        let spki = try Data(contentsOf: directory.appendingPathComponent("pub.der"))
        let point = spki.suffix(64)  // SubjectPublicKeyInfo ends with the uncompressed point 04‖X‖Y
        #expect(spki[spki.count - 65] == 0x04 && point == key.publicKey.rawRepresentation)
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(Base64URL.encode(point.prefix(32)))","y":"\#(Base64URL.encode(point.suffix(32)))"}"#
        let thumbprint = Base64URL.encode(Data(SHA256.hash(data: Data(canonical.utf8))))
        #expect(signer.keyID == thumbprint)

        let jwks = try await runSIWA(["receipts", "jwks"], environment: ["SIWA_RECEIPT_KEY_FILE": keyFile])
        #expect(jwks.status == 0, "\(jwks.output)")
        let keys = try #require((try JSONSerialization.jsonObject(with: Data(jwks.output.utf8)) as? [String: Any])?["keys"] as? [[String: String]])
        #expect(keys == [["kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": thumbprint,
                          "x": Base64URL.encode(point.prefix(32)), "y": Base64URL.encode(point.suffix(32))]])

        // A rotation keeps the old key after the new one.
        let oldSet = directory.appendingPathComponent("old.json").path
        try ES256KeySet([P256.Signing.PrivateKey().publicKey]).json().write(to: URL(fileURLWithPath: oldSet))
        let rotated = try await runSIWA(["receipts", "jwks", "--key-file", keyFile, "--include", oldSet, "--include", oldSet])
        #expect(rotated.status == 0, "\(rotated.output)")
        let both = try ES256KeySet(jwks: Data(rotated.output.utf8))
        #expect(both.entries.count == 2 && both.entries.first?.keyID == thumbprint)
    }

    /// Both settings or neither; a key file that is no key stops the worker
    /// with one line naming the setting (exit 2), as the Apple key does.
    @Test func theWorkerRefusesHalfTheSettingsOrABadKeyFile() async throws {
        let directory = try OpenSSL.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let text = directory.appendingPathComponent("not-a-key.pem").path
        try Data("this is not a key\n".utf8).write(to: URL(fileURLWithPath: text))
        let p384 = directory.appendingPathComponent("p384.pem").path
        try Data(P384.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: p384))
        let database = try await TestDatabase.create()
        let cases: [([String: String], String)] = [
            (["SIWA_RECEIPT_KEY_FILE": text, "SIWA_RECEIPT_ISSUER": "https://x"], "SIWA_RECEIPT_KEY_FILE: \(text): not a PEM file"),
            (["SIWA_RECEIPT_KEY_FILE": p384, "SIWA_RECEIPT_ISSUER": "https://x"], "SIWA_RECEIPT_KEY_FILE: \(p384): not a P-256 private key"),
            (["SIWA_RECEIPT_KEY_FILE": directory.path + "/missing.pem", "SIWA_RECEIPT_ISSUER": "https://x"],
             "no such file (the deletion-receipt signing key; make one with `siwa receipts keygen`)"),
            (["SIWA_RECEIPT_ISSUER": "https://x"], "SIWA_RECEIPT_KEY_FILE: is required when SIWA_RECEIPT_ISSUER is set"),
            (["SIWA_RECEIPT_KEY_FILE": p384], "SIWA_RECEIPT_ISSUER: is required when SIWA_RECEIPT_KEY_FILE is set"),
        ]
        for (settings, expected) in cases {
            let worker = try SIWAProcess(environment: settings.merging(["SIWA_DATABASE_URL": database.workerURL]) { $1 }, arguments: ["worker"])
            let status = await worker.child.wait()
            let lines = worker.log.split(separator: "\n")
            #expect(status == 2 && lines.count == 1 && lines.first?.hasPrefix("siwa: ") == true && worker.log.contains(expected),
                    "\(settings): \(worker.log)")
            #expect(!worker.log.contains("this is not a key") && !worker.log.contains("MIG"), "quotes the file: \(worker.log)")
        }
        let off = try SIWAProcess(environment: ["SIWA_DATABASE_URL": database.workerURL], arguments: ["worker"])
        try await off.waitForLog("Deletion receipts are off")
        await off.kill9()
    }

    /// serve takes public keys only: the private key is no key set. (The
    /// route that publishes the key set: RouteTests.)
    @Test func serveRefusesAPrivateKeyAsItsKeySet() async throws {
        let keys = try await ReceiptFixture.make()
        defer { keys.remove() }
        let error = #expect(throws: SettingError.self) {
            try ServerSettings(environment: SettingsReader(["SIWA_DATABASE_URL": "postgres://a@b/c", "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "x",
                                                            "SIWA_RECEIPT_JWKS_FILE": keys.keyFile]))
        }
        #expect(error?.description == "SIWA_RECEIPT_JWKS_FILE: \(keys.keyFile): not a JSON key set ({\"keys\": [...]})")
    }
}
