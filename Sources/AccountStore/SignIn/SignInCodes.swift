import Logging
import PostgresNIO

/// The hashes of the authorization codes of recent sign-ins
/// (`siwa.sign_in_codes`, sql/006), which let a retried sign-in get its
/// first answer again (SignInStore). The worker forgets them once their
/// retry window is over (SignInCodePruner).
public struct SignInCodes: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Forgets the codes of sign-ins older than the retry window
    /// (`SignInStore.replayWindowSeconds`): their retries are Apple's
    /// `invalid_grant` now. At most 10,000 per call; returns how many.
    @discardableResult
    public func prune() async throws -> Int {
        let rows = try await client.guardedQuery("""
            WITH gone AS (
                DELETE FROM siwa.sign_in_codes
                WHERE code_sha256 IN (SELECT code_sha256 FROM siwa.sign_in_codes
                                      WHERE created_at < now() - make_interval(secs => \(Double(SignInStore.replayWindowSeconds))::float8)
                                      LIMIT 10000)
                RETURNING 1
            )
            SELECT count(*) FROM gone
            """, logger: logger)
        return try rows.first?.decode(Int.self) ?? 0
    }
}
