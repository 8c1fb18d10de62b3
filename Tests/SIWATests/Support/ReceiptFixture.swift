import AccountStore
import Foundation
import Testing

/// A deletion-receipt key made by openssl (PKCS#8 PEM, as `siwa receipts
/// keygen` prints one), its public key as openssl derives it, and the key
/// set that `siwa receipts jwks` prints for it, in a fresh directory.
struct ReceiptFixture: Sendable {
    static let issuer = "https://siwa.example.test"

    let directory: URL
    let keyFile: String
    /// openssl's `pkey -pubout` of the key.
    let publicKeyPEM: String
    let jwksFile: String

    static func make() async throws -> ReceiptFixture {
        let directory = try OpenSSL.temporaryDirectory()
        let generated = try await OpenSSL.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                                               "-out", "receipt-key.pem"], in: directory)
        try #require(generated.status == 0, "\(generated.output)")
        let derived = try await OpenSSL.run(["pkey", "-in", "receipt-key.pem", "-pubout", "-out", "receipt-pub.pem"], in: directory)
        try #require(derived.status == 0, "\(derived.output)")
        let keyFile = directory.appendingPathComponent("receipt-key.pem").path
        let jwks = try await runSIWA(["receipts", "jwks", "--key-file", keyFile])
        try #require(jwks.status == 0, "\(jwks.output)")
        let jwksFile = directory.appendingPathComponent("receipt-keys.json").path
        try Data(jwks.output.utf8).write(to: URL(fileURLWithPath: jwksFile))
        return ReceiptFixture(directory: directory, keyFile: keyFile,
                              publicKeyPEM: try String(contentsOf: directory.appendingPathComponent("receipt-pub.pem"), encoding: .utf8),
                              jwksFile: jwksFile)
    }

    /// For the workers: receipts on.
    var workerSettings: [String: String] {
        ["SIWA_RECEIPT_KEY_FILE": keyFile, "SIWA_RECEIPT_ISSUER": Self.issuer]
    }

    /// For siwa serve: the key set it publishes.
    var serverSettings: [String: String] { ["SIWA_RECEIPT_JWKS_FILE": jwksFile] }

    /// The user's receipts, newest first, as the admin route reads them.
    static func receipts(in database: TestDatabase, sub: String) async throws -> [String] {
        try await database.withClient { client in
            try await DeletionReceipts(client: client, logger: TestEnvironment.logger).forUser(sub)
        }
    }

    /// `jws` with the character at `offset` (from the start of `segment`,
    /// 0 header, 1 claims, 2 signature) replaced by another of base64url's.
    static func tampered(_ jws: String, segment: Int, offset: Int) -> String {
        var parts = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var characters = Array(parts[segment])
        characters[offset] = characters[offset] == "A" ? "B" : "A"
        parts[segment] = String(characters)
        return parts.joined(separator: ".")
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
