import AccountLifecycle
import AppleSignIn
import ArgumentParser
import Foundation
import SIWAConfiguration

struct Receipts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deletion receipts: make the signing key, print its public key set, show a user's receipts, verify one.",
        discussion: """
            When a purge completes, siwa worker signs a receipt (a compact JWS, ES256, with the key \
            of SIWA_RECEIPT_KEY_FILE; iss SIWA_RECEIPT_ISSUER) with the Apple sub, the event that \
            asked for the purge, when it was requested and completed, each step with its time, and \
            what Apple answered to the revocation of the user's tokens; no email, name or token. \
            It is stored in siwa.deletion_receipts, kept when the job is pruned: the evidence to \
            hand to App Review or to the person who asked for erasure. Anyone can check it with \
            the public key set (`siwa receipts jwks`, also served by siwa serve at \
            /.well-known/siwa-receipts.json).

            \(SettingsDocs.help(for: .receipts))
            """,
        subcommands: [Keygen.self, JWKS.self, Show.self, Verify.self]
    )

    struct Keygen: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a new receipt signing key (P-256, PKCS#8 PEM).",
            discussion: """
                It is a secret: send it straight into a file only root can read, e.g.
                  (umask 077; siwa receipts keygen > /etc/siwa/receipt-key.pem)
                then give the worker a copy (LoadCredential= in siwa-worker.service) and publish its \
                public key set: siwa receipts jwks --key-file /etc/siwa/receipt-key.pem > /etc/siwa/receipt-keys.json
                """
        )

        func run() async throws {
            print(DeletionReceiptSigner.newKeyPEM())
        }
    }

    struct JWKS: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "jwks",
            abstract: "Print the public key set (JSON) that verifies the receipts.",
            discussion: """
                The public key of the signing key, named (kid) by its RFC 7638 thumbprint, as \
                siwa serve publishes it (SIWA_RECEIPT_JWKS_FILE). After a key rotation keep the \
                old keys: --include the set printed before, so receipts signed with them still verify.
                """
        )

        @Option(name: .customLong("key-file"), help: "The signing key (default: SIWA_RECEIPT_KEY_FILE).")
        var keyFile: String?

        @Option(help: "A key set file whose keys to keep after this key's (repeatable).")
        var include: [String] = []

        func run() async throws {
            let name = SettingsCatalog.receiptKeyFile.name
            guard let path = keyFile ?? ReceiptKeys.environment(name) else {
                Startup.fail("\(name): is required (or --key-file FILE): the receipt signing key")
            }
            var keys: ES256KeySet
            do { keys = try DeletionReceiptSigner.load(keyFile: path, issuer: "").publicKeys } catch {
                Startup.fail(keyFile == nil ? "\(name): \(error)" : "--key-file: \(error)")
            }
            for file in include {
                do { keys = keys.adding(try ES256KeySet.load(path: file)) } catch { Startup.fail("--include: \(error)") }
            }
            print(String(decoding: keys.json(pretty: true), as: UTF8.self))
        }
    }

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify a receipt offline.",
            discussion: """
                Checks the ES256 signature with the key its kid names, that it is a siwa deletion \
                receipt (typ), and the claims' shape. Prints `ok: signed with key KID` and the claims \
                (exit 0), or `refused: why` (exit 1).
                Keys: --jwks FILE (a key set, e.g. saved from /.well-known/siwa-receipts.json), else \
                SIWA_RECEIPT_JWKS_FILE, else the public key of SIWA_RECEIPT_KEY_FILE.
                """
        )

        @Argument(help: "A file holding the receipt (the compact JWS), or - for stdin.")
        var file: String

        @Option(help: "The key set to verify with.")
        var jwks: String?

        @Option(help: "Also require this iss.")
        var issuer: String?

        func run() async throws {
            let text: String?
            if file == "-" {
                text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
            } else {
                text = FileManager.default.contents(atPath: file).map { String(decoding: $0, as: UTF8.self) }
            }
            guard let text else { Startup.fail("cannot read \(file)", code: 1) }
            guard let keys = ReceiptKeys.load(jwks: jwks) else {
                Startup.fail("no keys to verify with: give --jwks FILE (or set SIWA_RECEIPT_JWKS_FILE or SIWA_RECEIPT_KEY_FILE)", code: 1)
            }
            do {
                let (receipt, keyID) = try DeletionReceipt.verify(text.trimmingCharacters(in: .whitespacesAndNewlines),
                                                                  keys: keys, issuer: issuer)
                print("ok: signed with key \(keyID)")
                print(receipt.prettyJSON)
            } catch {
                print("refused: \(error)")
                throw ExitCode(1)
            }
        }
    }
}

/// Where `siwa receipts` finds keys when none are given on the command line.
enum ReceiptKeys {
    static func environment(_ name: String) -> String? {
        guard let value = ProcessInfo.processInfo.environment[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else {
            return nil
        }
        return value
    }

    /// The key set of `--jwks FILE` when given (a bad file stops the
    /// command), else `fromEnvironment()`.
    static func load(jwks: String?) -> ES256KeySet? {
        guard let jwks else { return fromEnvironment() }
        do { return try ES256KeySet.load(path: jwks) } catch { Startup.fail("--jwks: \(error)", code: 1) }
    }

    /// SIWA_RECEIPT_JWKS_FILE, else the public key of SIWA_RECEIPT_KEY_FILE;
    /// nil if neither is set. A bad file stops the command naming the setting.
    static func fromEnvironment() -> ES256KeySet? {
        let jwksName = SettingsCatalog.receiptJWKSFile.name
        if let path = environment(jwksName) {
            do { return try ES256KeySet.load(path: path) } catch { Startup.fail("\(jwksName): \(error)", code: 1) }
        }
        let keyName = SettingsCatalog.receiptKeyFile.name
        guard let path = environment(keyName) else { return nil }
        do { return try DeletionReceiptSigner.load(keyFile: path, issuer: "").publicKeys } catch {
            Startup.fail("\(keyName): \(error)", code: 1)
        }
    }
}
