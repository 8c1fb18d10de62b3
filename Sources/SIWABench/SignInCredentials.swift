import AccountStore
import AppleSimulator
import Foundation
import Logging
import PostgresNIO

/// What sign-in needs, made for one run: the team's key and a token key
/// ring on disk (`SimulatedTeamKeyFiles`, registered with the simulator);
/// and an API key for `/v1`.
enum SignInCredentials {
    /// The bench's one developer team (notifications and sign-ins alike).
    static let teamID = "BENCH12345"

    static func files(registeringWith apple: AppleSimulator) throws -> SimulatedTeamKeyFiles {
        let files = try SimulatedTeamKeyFiles(teamID: teamID, keyID: "BENCHKEY01",
                                              keyRing: [TokenKeyRing.newKeyLine(id: "bench1")], label: "bench-signin")
        files.register(with: apple)
        return files
    }

    /// A live API key, made as the database owner (as `siwa api-keys create`).
    static func apiKey(_ client: PostgresClient, logger: Logger) async throws -> String {
        try await APIKeyAdministration(client: client, logger: logger).create(name: "bench", loginHint: "siwa-bench").key
    }
}
