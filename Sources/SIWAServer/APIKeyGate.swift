import AccountStore
import Foundation
import Hummingbird
import Logging

/// The `/v1` API's door: `Authorization: Bearer KEY`, checked against the
/// database on every request (a revoked key stops working at once on every
/// instance). 401 `{"error":"unauthorized"}` for a missing, malformed,
/// unknown or revoked key; 503 when the database cannot say.
struct APIKeyGate: Sendable {
    /// The key's name, or nil when the key is not a live one.
    let authenticate: @Sendable (String) async throws -> String?
    let logger: Logger

    func guarded(_ request: Request, _ body: (String) async -> Response) async throws -> Response {
        guard let header = request.headers[.authorization], header.utf8.count <= 512,
              header.lowercased().hasPrefix("bearer ") else { return Self.unauthorized() }
        let key = header.dropFirst("bearer ".count).trimmingCharacters(in: .whitespaces)
        let name: String?
        do { name = try await authenticate(key) } catch {
            logger.warning("API key check could not reach the database", metadata: ["error": "\(safeDescription(error))"])
            var response = APIResponse.error(.serviceUnavailable, "unavailable", "the database is unavailable; retry later")
            response.headers[.retryAfter] = "5"
            return response
        }
        guard let name else { return Self.unauthorized() }
        return await body(name)
    }

    static func unauthorized() -> Response {
        var response = APIResponse.error(.unauthorized, "unauthorized", "a valid API key is required: Authorization: Bearer KEY")
        response.headers[.wwwAuthenticate] = "Bearer"
        return response
    }
}
