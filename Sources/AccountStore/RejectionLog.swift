import Crypto
import Foundation
import Logging
import PostgresNIO

/// `siwa.rejected_notifications`: why a body was refused, with its SHA-256
/// and size only; the token itself and anything personal stay out.
public struct RejectionLog: Sendable {
    let client: PostgresClient

    public init(client: PostgresClient) { self.client = client }

    /// - Parameter byteCount: the body's size when it was not read whole
    ///   (its Content-Length); by default the size of `body`.
    public func record(reason: String, detail: String?, body: some DataProtocol & Sendable, byteCount: Int? = nil,
                       logger: Logger) async throws {
        let digest = SHA256.hash(data: Data(body)).map { String(format: "%02x", $0) }.joined()
        let detail = detail.map { String($0.prefix(200)) }
        try await client.query("""
            INSERT INTO siwa.rejected_notifications (reason, detail, body_sha256, body_bytes)
            VALUES (\(reason), \(detail), \(digest), \(byteCount ?? body.count))
            """, logger: logger)
    }
}
