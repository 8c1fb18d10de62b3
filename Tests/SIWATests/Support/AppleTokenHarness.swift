import AppleSignIn
import AppleSimulator
import AsyncHTTPClient
import Crypto
import Foundation
import Logging

/// The simulator on loopback with a registered team key, and siwa's
/// `AppleAuthClient` pointed at it.
struct AppleTokenHarness: Sendable {
    static let teamID = "TEAM123456"
    static let keyID = "KEY1234567"
    static let logger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    let apple: AppleSimulator
    let server: RunningServer
    let httpClient: HTTPClient
    /// The registered key's private half, and as siwa loads it.
    let privateKey: P256.Signing.PrivateKey
    let key: AppleClientSecretKey
    let client: AppleAuthClient

    /// Another client of the same simulator, with its own secrets (another
    /// key, team or clock) and deadline.
    func client(secrets: ClientSecretProvider? = nil, timeout: Duration? = nil) -> AppleAuthClient {
        AppleAuthClient(baseURL: server.baseURL, httpClient: httpClient, secrets: secrets ?? client.secrets,
                        timeout: timeout ?? client.timeout)
    }

    /// Verifies identity tokens with the simulator's published keys,
    /// fetched over HTTP as siwa does.
    func identityVerifier(audience: String) -> IdentityTokenVerifier {
        let keys = AppleKeySet(source: HTTPJWKSSource(url: server.baseURL + "/auth/keys", httpClient: httpClient), logger: Self.logger)
        return IdentityTokenVerifier(keys: keys, policy: VerificationPolicy(audiences: [audience]))
    }

    /// Runs `body` against a fresh simulator, and stops everything after.
    static func with<T: Sendable>(timeout: Duration = .seconds(5), _ body: (AppleTokenHarness) async throws -> T) async throws -> T {
        let apple = try AppleSimulator()
        let privateKey = P256.Signing.PrivateKey()
        apple.registerClient(teamID: teamID, keyID: keyID, publicKey: privateKey.publicKey)
        let key = AppleClientSecretKey(teamID: teamID, keyID: keyID, privateKey: privateKey)
        let server = try await TestPorts.serve { try await apple.start(port: $0, logger: logger) }
        let httpClient = AppleAuthClient.makeHTTPClient()
        let harness = AppleTokenHarness(
            apple: apple, server: server, httpClient: httpClient, privateKey: privateKey, key: key,
            client: AppleAuthClient(baseURL: server.baseURL, httpClient: httpClient,
                                    secrets: try ClientSecretProvider(key: key), timeout: timeout))
        do {
            let result = try await body(harness)
            try await httpClient.shutdown()
            await server.stop()
            return result
        } catch {
            try? await httpClient.shutdown()
            await server.stop()
            throw error
        }
    }
}

extension AppleTokenOutcome {
    /// The response of a success, else nil.
    var response: AppleTokenResponse? {
        if case .success(let response) = self { return response }
        return nil
    }
}
