import AsyncHTTPClient
import Foundation
import NIOCore

/// Fetches the JWKS document over HTTP (Apple's `/auth/keys`, or the
/// simulator's in tests). Only ever the configured URL: keys are never
/// fetched from a URL a token names, and never from where a redirect points
/// (give it a client from `makeHTTPClient()`, which follows none; a 3xx
/// answer is then an error like any other non-200).
public struct HTTPJWKSSource: JWKSSource {
    /// Apple's key set for Sign in with Apple.
    public static let appleKeysURL = "https://appleid.apple.com/auth/keys"

    /// Where the key set is fetched from (``appleKeysURL`` in production).
    public let url: String
    /// The client that fetches it (see ``makeHTTPClient(eventLoopGroup:)``).
    public let httpClient: HTTPClient
    /// One deadline for the whole fetch: connecting, the answer's head and
    /// its whole body. A server that sends the head and then stalls (or
    /// trickles) the body fails the fetch when it passes.
    public let timeout: TimeAmount
    /// Apple's document is about 2 KiB; refuse anything absurd.
    static let maximumBytes = 256 * 1024
    /// Told of each fetch (`AppleCallObserver`, endpoint `keys`); nil: none.
    public var observer: (any AppleCallObserver)?

    /// - Parameters:
    ///   - url: the key set's URL, ``appleKeysURL`` unless you test against a stand-in.
    ///   - httpClient: a client from ``makeHTTPClient(eventLoopGroup:)``, which you shut down.
    ///   - timeout: the deadline for one whole fetch.
    ///   - observer: told of each fetch.
    public init(url: String, httpClient: HTTPClient, timeout: TimeAmount = .seconds(10), observer: (any AppleCallObserver)? = nil) {
        self.url = url
        self.httpClient = httpClient
        self.timeout = timeout
        self.observer = observer
    }

    /// A client for Apple: follows no redirect, connects within 5 s (key
    /// fetches, and AppleAuthClient's token calls). The caller owns it and
    /// must `shutdown()` it.
    public static func makeHTTPClient(eventLoopGroup: any EventLoopGroup = HTTPClient.defaultEventLoopGroup,
                                      connectionsPerHost: Int = 8) -> HTTPClient {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(5), read: .seconds(10)),
            decompression: .disabled
        )
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = connectionsPerHost
        return HTTPClient(eventLoopGroup: eventLoopGroup, configuration: configuration)
    }

    /// One GET of the key set: the body of a 200 answer within the deadline
    /// and the size limit, else an error (the key set keeps its keys).
    public func fetchJWKS() async throws -> Data {
        let result: Result<Data, any Error> = await observer.observe(.keys) {
            do {
                return (.success(try await fetch()), .ok)
            } catch let error as HTTPStatusError {
                return (.failure(error), (400..<500).contains(error.status) ? .rejected : .unavailable)
            } catch {
                return (.failure(error), .unavailable)
            }
        }
        return try result.get()
    }

    /// A non-200 answer.
    struct HTTPStatusError: Error, CustomStringConvertible {
        let status: Int
        let description: String
    }

    private func fetch() async throws -> Data {
        let deadline = NIODeadline.now() + timeout
        let (url, client, timeout) = (self.url, self.httpClient, self.timeout)
        // The body is collected inside the race too: `execute`'s deadline
        // only covers the head.
        return try await withThrowingTaskGroup(of: Data?.self) { group in
            group.addTask {
                var request = HTTPClientRequest(url: url)
                request.headers.add(name: "Accept", value: "application/json")
                let response = try await client.execute(request, deadline: deadline)
                guard response.status == .ok else {
                    throw HTTPStatusError(status: Int(response.status.code), description: "GET \(url) answered \(response.status.code)")
                }
                let body = try await response.body.collect(upTo: Self.maximumBytes)
                try Task.checkCancellation()
                return Data(body.readableBytesView)
            }
            group.addTask {
                try await Task.sleep(for: .nanoseconds(timeout.nanoseconds))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let data = first else {
                throw JWKSError("GET \(url) did not complete within \(Double(timeout.nanoseconds) / 1e9) s")
            }
            return data
        }
    }

    /// The URL (for logs).
    public var description: String { url }
}
