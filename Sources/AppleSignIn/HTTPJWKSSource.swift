import AsyncHTTPClient
import Foundation
import NIOCore

/// Fetches the JWKS document over HTTP (Apple's `/auth/keys`, or the
/// simulator's in tests). Only ever the configured URL: keys are never
/// fetched from a URL a token names.
public struct HTTPJWKSSource: JWKSSource {
    public let url: String
    public let httpClient: HTTPClient
    public let timeout: TimeAmount
    /// Apple's document is about 2 KiB; refuse anything absurd.
    static let maximumBytes = 256 * 1024

    public init(url: String, httpClient: HTTPClient, timeout: TimeAmount = .seconds(10)) {
        self.url = url
        self.httpClient = httpClient
        self.timeout = timeout
    }

    public func fetchJWKS() async throws -> Data {
        var request = HTTPClientRequest(url: url)
        request.headers.add(name: "Accept", value: "application/json")
        let response = try await httpClient.execute(request, timeout: timeout)
        guard response.status == .ok else {
            throw JWKSError("GET \(url) answered \(response.status.code)")
        }
        let body = try await response.body.collect(upTo: Self.maximumBytes)
        return Data(body.readableBytesView)
    }

    public var description: String { url }
}
