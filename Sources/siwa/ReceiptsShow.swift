import AccountLifecycle
import AccountStore
import AppleSignIn
import ArgumentParser
import Foundation
import SIWAConfiguration

extension Receipts {
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a user's deletion receipts, newest first.",
            discussion: """
                Needs SIWA_DATABASE_URL: your own database role (a member of siwa_admin or \
                siwa_auditor). Each receipt is printed as its decoded claims, whether its signature \
                verifies (with SIWA_RECEIPT_JWKS_FILE or SIWA_RECEIPT_KEY_FILE, when set), then the \
                receipt itself (the compact JWS, to hand over as it is). --json prints \
                {"receipts": [JWS, ...]}, as GET /admin/receipts/{sub} answers.
                """
        )

        @OptionGroup var user: UserArguments

        @Flag(help: "{\"receipts\": [JWS, ...]} instead of the readable form.")
        var json = false

        func run() async throws {
            let (user, sub) = (user, user.sub)
            let receipts = await CommandDatabase.run(label: "siwa.receipts", refusing: SettingError.self) { client, logger in
                let team = try await user.team(client: client, logger: logger)
                return try await DeletionReceipts(client: client, logger: logger).forUser(sub, team: team)
            }
            if json {
                print(String(decoding: try AnswerJSON.encode(DeletionReceipts.List(receipts: receipts)), as: UTF8.self))
                return
            }
            guard !receipts.isEmpty else {
                print("no deletion receipts for \(sub)")
                return
            }
            let keys = ReceiptKeys.fromEnvironment()
            for (index, jws) in receipts.enumerated() {
                if index > 0 { print() }
                print("receipt \(index + 1) of \(receipts.count)")
                print(Self.describe(jws, keys: keys))
                print(jws)
            }
        }

        /// The claims and the signature's state; the claims are decoded
        /// without a check when there are no keys (or it fails).
        static func describe(_ jws: String, keys: ES256KeySet?) -> String {
            if let keys {
                do {
                    let (receipt, keyID) = try DeletionReceipt.verify(jws, keys: keys)
                    return receipt.prettyJSON + "\nsignature: ok (key \(keyID))"
                } catch {
                    return unverifiedClaims(jws) + "\nsignature: FAILED: \(error)"
                }
            }
            return unverifiedClaims(jws) + "\nsignature: not checked (set SIWA_RECEIPT_JWKS_FILE, or use siwa receipts verify)"
        }

        static func unverifiedClaims(_ jws: String) -> String {
            let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3, let payload = Base64URL.decode(parts[1]),
                  let receipt = try? JSONDecoder().decode(DeletionReceipt.self, from: payload) else {
                return "(claims do not decode as a deletion receipt)"
            }
            return receipt.prettyJSON
        }
    }
}
