import AsyncHTTPClient
import ServiceLifecycle

/// Shuts an HTTP client down when its service group stops (after the
/// services later in the list, which stop first and may still use it).
public struct HTTPClientService: Service {
    let client: HTTPClient

    public init(client: HTTPClient) { self.client = client }

    public func run() async throws {
        try? await gracefulShutdown()
        try await client.shutdown()
    }
}
