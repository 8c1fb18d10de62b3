import AccountStore
import ArgumentParser
import Foundation
import SIWAConfiguration

struct Tokens: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the key ring that encrypts the stored Apple tokens; validate a user's tokens now.",
        discussion: """
            Apple's refresh and access tokens are stored encrypted (AES-256-GCM) under the keys in \
            SIWA_TOKEN_ENCRYPTION_KEYS_FILE: one key a line, KEY_ID:BASE64_OF_32_BYTES, blank lines and \
            # comments allowed. The first key encrypts; every key decrypts. Keep the file readable by \
            siwa's user only (chmod 600).
            To rotate: `siwa tokens keygen`, put its line FIRST in the file, restart serve and worker, \
            run `siwa tokens rekey`, and only then remove the old lines.
            """,
        subcommands: [Keygen.self, Rekey.self, Validate.self, Forget.self, ResumeValidation.self]
    )

    struct Keygen: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a new key line, KEY_ID:BASE64, for the token key ring.",
            discussion: """
                Prints one line: a key id and 32 random bytes in base64. It is a secret: send it \
                straight into the key ring file, never into a ticket or a chat.
                To rotate, put the new line FIRST in SIWA_TOKEN_ENCRYPTION_KEYS_FILE (new tokens are \
                sealed with the first key) and keep the old lines below it: they still decrypt the \
                stored tokens until `siwa tokens rekey` has re-encrypted them all under the new key. \
                For example:
                  { siwa tokens keygen; cat /etc/siwa/token-keys; } > /etc/siwa/token-keys.new
                  chmod 600 /etc/siwa/token-keys.new && mv /etc/siwa/token-keys.new /etc/siwa/token-keys
                """
        )

        @Option(help: """
            The key id (1 to 32 characters of A-Z a-z 0-9 . _ -). Default: k<today's date><letter>, \
            the first letter not used yet in SIWA_TOKEN_ENCRYPTION_KEYS_FILE when it is readable.
            """)
        var id: String?

        func validate() throws {
            if let id, !TokenKeyRing.isValidKeyID(id) {
                throw ValidationError("--id must be 1 to 32 characters of A-Z, a-z, 0-9, '.', '_' and '-'")
            }
        }

        func run() async throws {
            print(TokenKeyRing.newKeyLine(id: id ?? Self.defaultID()))
        }

        /// `k20261123a`: today's date (UTC) and a letter that the current
        /// ring does not use yet.
        static func defaultID() -> String {
            let stem = "k" + UTCTime.text(Date(), .seconds).prefix(10).filter { $0 != "-" }
            let taken = ProcessInfo.processInfo.environment[SettingsCatalog.tokenEncryptionKeysFile.name]
                .flatMap { try? TokenKeyRing.load(path: $0).ring.keyIDs } ?? []
            let letters = "abcdefghijklmnopqrstuvwxyz".map { stem + String($0) }
            return letters.first { !taken.contains($0) } ?? stem + "-" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
        }
    }

    struct Rekey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Re-encrypt every stored Apple token under the key ring's first key.",
            discussion: """
                Needs SIWA_DATABASE_URL (the worker's role: run it with worker.env, as siwa worker) and \
                SIWA_TOKEN_ENCRYPTION_KEYS_FILE holding the new key first and the old keys after it. \
                Safe while serve and worker run: it works in batches, each locking its rows, so a \
                sign-in or validation is never overwritten with a stale token. Safe to run again.
                Prints how many tokens were re-encrypted, how many were already under the first key, \
                and each row that did not decrypt (user_id and client_id only; the row is left as \
                it is), then exits 1 if any did not. Remove an old key from the file only after a run \
                that reports no failure.
                """
        )

        @Option(help: "Rows per transaction.")
        var batchSize = 500

        func validate() throws {
            guard (1...10_000).contains(batchSize) else { throw ValidationError("--batch-size must be in 1...10000") }
        }

        func run() async throws {
            let ring = Self.loadRing()
            let batchSize = batchSize
            let report = await CommandDatabase.run(label: "siwa.tokens", refusing: TokenKeyRingError.self) { client, logger in
                try await TokenRekey(client: client, ring: ring, logger: logger, batchSize: batchSize).run()
            }
            for failure in report.failures {
                print("failed: user_id \(failure.userID) client_id \(failure.clientID): \(failure.reason); left as it is")
            }
            print("re-encrypted: \(report.reencrypted) (now under key \(ring.currentKeyID))")
            print("already current: \(report.alreadyCurrent)")
            print("failed to decrypt: \(report.failures.count)")
            if !report.failures.isEmpty { throw ExitCode(1) }
        }

        static func loadRing() -> TokenKeyRing {
            let name = SettingsCatalog.tokenEncryptionKeysFile.name
            guard let path = ProcessInfo.processInfo.environment[name]?.trimmingCharacters(in: .whitespaces), !path.isEmpty else {
                Startup.fail("\(name): is required (e.g. \(name)=/etc/siwa/token-keys)")
            }
            do {
                let (ring, warning) = try TokenKeyRing.load(path: path)
                if let warning { Startup.warn("\(name): \(warning)") }
                return ring
            } catch {
                Startup.fail("\(name): \(error)")
            }
        }
    }

    struct Forget: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a user's stored tokens that no key of the ring decrypts (audited).",
            discussion: """
                A token whose key left SIWA_TOKEN_ENCRYPTION_KEYS_FILE cannot be revoked at Apple, and \
                the purge never erases a token it did not revoke: the user's purge fails at its \
                apple.revoke_tokens step (`siwa jobs show` says which key). Restore the key if you \
                can. If it is lost, this deletes those tokens (audit row token.forgotten, with your \
                database role and login); the purge then goes on (`siwa jobs retry ID` if it was \
                discarded), and the user must remove the app at their Apple Account by hand \
                (Sign-In and Security > Sign in with Apple). Tokens that decrypt are left alone.
                Needs SIWA_DATABASE_URL (the worker's role: run it with worker.env) and SIWA_TOKEN_ENCRYPTION_KEYS_FILE.
                """
        )

        @OptionGroup var user: UserArguments

        func run() async throws {
            let ring = Rekey.loadRing()
            let user = user
            let (forgotten, kept) = await CommandDatabase.run(label: "siwa.tokens", refusing: TokenKeyRingError.self) { client, logger in
                let (sub, team) = (user.sub, try await user.existingTeam(client: client, logger: logger))
                return try await UnrevocableTokens(client: client, ring: ring, logger: logger).forget(appleSub: sub, team: team,
                                                                                                   loginHint: JobsConnection.loginHint)
            }
            for token in forgotten {
                print("forgotten: \(token.clientID) (sealed under key \(token.keyID), which the ring lacks): not revoked at Apple")
            }
            print("forgotten: \(forgotten.count), left (they decrypt and can be revoked): \(kept)")
        }
    }

    struct ResumeValidation: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "resume-validation",
            abstract: "Resume token validation after it paused on too many invalid_grant answers (audited).",
            discussion: """
                The worker pauses the daily validation of refresh tokens when more than \
                SIWA_VALIDATION_INVALID_GRANT_PAUSE_PERCENT of the last 100 answers were invalid_grant: \
                each such answer ends a user's session, and an incident at Apple (or a wrong client \
                id) must not end every user's session at the validation rate. While paused, \
                siwa_validation_paused is 1 on the worker's /metrics and nothing is validated. Look \
                into it first: Apple's system status, the `token.invalid_grant` rows of \
                `siwa audit --action token.invalid_grant`. Then run this: validation resumes \
                within the worker's poll (30 s), counting afresh (audit row token_validation.resumed, \
                with your database role).
                Needs SIWA_DATABASE_URL with a role that is a member of siwa_admin.
                """
        )

        func run() async throws {
            let outcome = await CommandDatabase.run(label: "siwa.tokens", refusing: SettingError.self) { client, logger in
                let rows = try await client.query("SELECT was_paused, paused_at, reason FROM siwa.resume_token_validation()",
                                                  logger: logger)
                for try await (wasPaused, since, reason) in rows.decode((Bool, Date?, String?).self) {
                    return (wasPaused, since, reason)
                }
                return (false, nil, nil)
            }
            guard outcome.0 else {
                print("token validation is not paused: nothing to do")
                return
            }
            let since = outcome.1.map { UTCTime.text($0, .seconds) } ?? "?"
            print("token validation resumed (paused since \(since): \(outcome.2 ?? "no reason recorded"))")
        }
    }
}
