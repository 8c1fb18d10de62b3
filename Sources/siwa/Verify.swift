import AccountStore
import AppleSignIn
import ArgumentParser
import AsyncHTTPClient
import Foundation
import Logging

struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Verify an Apple notification or identity token offline.",
        discussion: """
            Prints the verified claims as JSON (a notification's events decoded) and exits 0, \
            or prints why the token is refused and exits 1. Notifications (with a jti and \
            events) and identity tokens are told apart automatically.

            Example: siwa verify "$TOKEN" --jwks apple-keys.json --at 1630085413 --client-id com.example.app
            """
    )

    @Argument(help: "The compact JWS (header.payload.signature), or - to read it from stdin.")
    var token: String

    @Option(help: "A JWKS file with Apple's keys (default: fetch SIWA_APPLE_JWKS_URL or Apple's).")
    var jwks: String?

    @Option(help: "Check exp/iat as of this Unix time (seconds), e.g. iat + 1 for an old token.")
    var at: Double?

    @Option(name: .customLong("client-id"), help: "Accepted audience; repeatable (default: SIWA_APPLE_CLIENT_IDS, else the token's own aud).")
    var clientIDs: [String] = []

    func run() async throws {
        let token = self.token == "-" ? (readLine(strippingNewline: true) ?? "") : self.token
        let logger = Logger(label: "siwa.verify", factory: { _ in SwiftLogNoOpLogHandler() })
        if let at, !(at.isFinite && (0...253_402_300_799).contains(at)) {
            Startup.fail("--at: expected Unix seconds between 0 and 253402300799 (year 9999)", code: 1)
        }
        let keys: AppleKeySet
        var keysClient: HTTPClient?
        if let jwks {
            guard let data = FileManager.default.contents(atPath: jwks) else { Startup.fail("cannot read \(jwks)", code: 1) }
            do { keys = try AppleKeySet(jwks: data, logger: logger) } catch { Startup.fail("\(jwks): \(error)", code: 1) }
        } else {
            let url = ProcessInfo.processInfo.environment["SIWA_APPLE_JWKS_URL"] ?? "https://appleid.apple.com/auth/keys"
            let client = HTTPJWKSSource.makeHTTPClient()
            keysClient = client
            keys = AppleKeySet(source: HTTPJWKSSource(url: url, httpClient: client), logger: logger)
        }
        let audiences = Set(clientIDs.isEmpty ? Self.defaultAudiences(token) : clientIDs)
        let instant = at.map { Date(timeIntervalSince1970: $0) }
        let policy = VerificationPolicy(audiences: audiences, now: { instant ?? Date() })

        let outcome: Result<Data, any Error>
        do {
            if Self.looksLikeNotification(token) {
                outcome = .success(try await NotificationVerifier(keys: keys, policy: policy).verify(token).claimsJSON)
            } else {
                outcome = .success(try await IdentityTokenVerifier(keys: keys, policy: policy).verify(token).claimsJSON)
            }
        } catch {
            outcome = .failure(error)
        }
        try? await keysClient?.shutdown()

        do {
            let claims = try JSONValue(parsing: String(decoding: try outcome.get(), as: UTF8.self))
            print(String(decoding: try AnswerJSON.pretty(claims), as: UTF8.self))
        } catch let failure as VerificationFailure {
            print("refused: \(failure.reason): \(failure.detail)")
            throw ExitCode(1)
        } catch {
            print("cannot verify: \(error)")
            throw ExitCode(1)
        }
    }

    /// Without --client-id or SIWA_APPLE_CLIENT_IDS, accept the token's own
    /// audience (offline inspection); `aud` is still required to be present.
    static func defaultAudiences(_ token: String) -> [String] {
        if let ids = ProcessInfo.processInfo.environment["SIWA_APPLE_CLIENT_IDS"], !ids.isEmpty {
            return ids.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        switch unverifiedClaims(token)?["aud"] {
        case .string(let aud)?: return [aud]
        case .array(let auds)?:
            let names = auds.compactMap { if case .string(let aud) = $0 { aud } else { nil } }
            return names.count == auds.count ? names : []
        default: return []
        }
    }

    static func looksLikeNotification(_ token: String) -> Bool {
        unverifiedClaims(token)?["events"] != nil
    }

    private static func unverifiedClaims(_ token: String) -> JSONValue? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let data = Base64URL.decode(parts[1]) else { return nil }
        return try? JSONValue(parsing: String(decoding: data, as: UTF8.self))
    }
}
