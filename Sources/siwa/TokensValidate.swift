import AccountLifecycle
import AccountStore
import ArgumentParser
import Foundation
import Logging
import Metrics
import SIWAConfiguration

extension Tokens {
    struct Validate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate one user's stored refresh tokens with Apple now.",
            discussion: """
                Asks Apple's /auth/token (grant_type=refresh_token) about each refresh token siwa \
                holds for the user, as `siwa worker` does once per SIWA_REFRESH_VALIDATION_HOURS, and \
                records the answer the same way: valid (the new access token stored), invalid_grant \
                (the user revoked access or changed their password: the token is deleted and the \
                user's session ends; nothing is purged), paused (validation is paused: see \
                `siwa tokens resume-validation`), or undecided (Apple unreachable, 5xx, 429: retried \
                later). A token checked less than a period ago is left alone unless --force: Apple \
                asks for at most one check a day.
                Needs the worker's settings: SIWA_DATABASE_URL, SIWA_APPLE_TEAM_ID, SIWA_APPLE_KEY_ID, \
                SIWA_APPLE_PRIVATE_KEY_FILE, SIWA_TOKEN_ENCRYPTION_KEYS_FILE.
                Exit status 0 when every token's answer was decided (valid or invalid_grant), 1 otherwise.
                """
        )

        @OptionGroup var user: UserArguments

        @Flag(help: "Check even a token that is not due (checked less than a period ago).")
        var force = false

        func run() async throws {
            let env = Startup.reader()
            let configured = Startup.settings { try SignInSettings.read(env) }
            guard let signIn = configured else {
                Startup.fail("sign-in is not configured: set SIWA_APPLE_TEAM_ID, SIWA_APPLE_KEY_ID, SIWA_APPLE_PRIVATE_KEY_FILE and SIWA_TOKEN_ENCRYPTION_KEYS_FILE")
            }
            let validation = Startup.settings { () throws -> TokenValidationSettings in
                var settings = try TokenValidationSettings(environment: env)
                settings.requestsPerSecond = nil  // one token, on request: no rate to cap
                return settings
            }
            let access = Startup.settings { try AppleAccess(signIn) }
            let (user, sub, force) = (user, user.sub, force)
            let results = await CommandDatabase.run(label: "siwa.tokens", refusing: SettingError.self) { client, logger in
                let team = try await user.existingTeam(client: client, logger: logger)
                let queue = TokenValidationQueue(client: client, periodHours: validation.periodHours ?? 24, logger: logger)
                let validator = TokenValidator(queue: queue, apple: access.apple, keyRing: access.keyRing,
                                               settings: validation, logger: logger, metrics: MetricsSystem.factory)
                var results: [(DueAppleToken, TokenValidationResult)] = []
                for token in try await queue.claim(appleSub: sub, team: team, force: force) {
                    results.append((token, await validator.validate(token)))
                }
                return results
            }
            try? await access.httpClient.shutdown()
            if results.isEmpty {
                print(force ? "no stored refresh token for \(sub) (or the user is not active)"
                            : "no token of \(sub) is due (checked less than a period ago, or none stored); --force checks anyway")
                return
            }
            for (token, result) in results {
                print("\(token.clientID): \(result.rawValue)")
            }
            if results.contains(where: { [.undecided, .invalidClient, .paused].contains($0.1) }) { throw ExitCode(1) }
        }
    }
}
