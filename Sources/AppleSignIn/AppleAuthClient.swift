import AsyncHTTPClient
import Foundation
import NIOCore

/// Which token `/auth/revoke` is given (Apple requires the hint).
public enum AppleTokenTypeHint: String, Sendable {
    case refreshToken = "refresh_token"
    case accessToken = "access_token"
}

/// A client of Apple's `/auth/token` (code exchange, refresh) and
/// `/auth/revoke`. Apple's answers come back as typed outcomes, never as
/// thrown errors; nothing it returns or prints holds a token, a code or the
/// client secret. Pure client: no logging, no retries, and no metrics or
/// spans of its own: each call is handed to `observer` (if any), which may
/// count, time and trace it.
public struct AppleAuthClient: Sendable {
    public static let appleBaseURL = "https://appleid.apple.com"
    /// Apple's answers are a few KiB (the id_token is the largest part).
    static let maximumBodyBytes = 64 * 1024

    public let baseURL: String
    public let httpClient: HTTPClient
    public let secrets: ClientSecretProvider
    /// One deadline for each request: connecting, the answer's head and its
    /// whole body.
    public let timeout: Duration
    /// Told of each call (`AppleCallObserver`); nil: none.
    public var observer: (any AppleCallObserver)?

    /// - Parameter httpClient: one from `makeHTTPClient()` (follows no redirect).
    public init(baseURL: String = appleBaseURL, httpClient: HTTPClient, secrets: ClientSecretProvider,
                timeout: Duration = .seconds(10), observer: (any AppleCallObserver)? = nil) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.httpClient = httpClient
        self.secrets = secrets
        self.timeout = timeout
        self.observer = observer
    }

    /// A client for Apple's token endpoints: follows no redirect (a 3xx is
    /// an answer like any other, and never sends the secret elsewhere),
    /// connects within 5 s. The caller owns it and must `shutdown()` it.
    ///
    /// Up to 64 connections to Apple at once (AsyncHTTPClient's default is
    /// 8): every sign-in waits on one exchange, and with 8 the 9th
    /// concurrent sign-in queued behind the others' round trips to Apple.
    public static func makeHTTPClient(eventLoopGroup: any EventLoopGroup = HTTPClient.defaultEventLoopGroup) -> HTTPClient {
        HTTPJWKSSource.makeHTTPClient(eventLoopGroup: eventLoopGroup, connectionsPerHost: 64)
    }

    /// Exchanges an authorization code (from the app's sign-in) for tokens.
    /// `redirectURI` goes only when given (web sign-in; the app flow has none).
    public func exchange(code: String, clientID: String, redirectURI: String? = nil) async -> AppleTokenOutcome {
        var fields = [("code", code), ("grant_type", "authorization_code")]
        if let redirectURI { fields.append(("redirect_uri", redirectURI)) }
        return await token(fields: fields, clientID: clientID)
    }

    /// Checks a refresh token (and gets a new access token and id_token).
    public func refresh(refreshToken: String, clientID: String) async -> AppleTokenOutcome {
        await token(fields: [("grant_type", "refresh_token"), ("refresh_token", refreshToken)], clientID: clientID)
    }

    public func revoke(token: String, clientID: String, tokenTypeHint: AppleTokenTypeHint = .refreshToken) async -> AppleRevokeOutcome {
        let fields = [("token", token), ("token_type_hint", tokenTypeHint.rawValue)]
        switch await post(path: "/auth/revoke", fields: fields, clientID: clientID) {
        case .ok: return .success
        case .invalidGrant: return .invalidGrant
        case .invalidClient: return .invalidClient
        case .rejected(let status, let error): return .rejected(status: status, error: error)
        case .unavailable(let retryAfter, let reason): return .unavailable(retryAfter: retryAfter, reason: reason)
        }
    }

    private func token(fields: [(String, String)], clientID: String) async -> AppleTokenOutcome {
        switch await post(path: "/auth/token", fields: fields, clientID: clientID) {
        case .ok(let body):
            guard let response = AppleTokenResponse.decoding(body) else {
                return .unavailable(retryAfter: nil, reason: "status 200 with a body that is not a token response")
            }
            return .success(response)
        case .invalidGrant: return .invalidGrant
        case .invalidClient: return .invalidClient
        case .rejected(let status, let error): return .rejected(status: status, error: error)
        case .unavailable(let retryAfter, let reason): return .unavailable(retryAfter: retryAfter, reason: reason)
        }
    }

    /// POSTs `client_id`, `client_secret` and `fields` as a form (with
    /// `Authorization: Bearer` when `bearer` is given: `/auth/usermigrationinfo`)
    /// and sorts the answer.
    func post(path: String, fields: [(String, String)], clientID: String, bearer: String? = nil) async -> AppleAnswer.Kind {
        let secret: String
        do { secret = try secrets.secret(for: clientID) } catch {
            return .unavailable(retryAfter: nil, reason: "the client secret could not be signed")
        }
        let form = FormURLEncoding.encode([("client_id", clientID), ("client_secret", secret)] + fields)
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "Accept", value: "application/json")
        if let bearer { request.headers.add(name: "Authorization", value: "Bearer " + bearer) }
        request.body = .bytes(ByteBuffer(string: form))
        guard let endpoint = AppleEndpoint(path: path) else { return await send(request) }
        return await observer.observe(endpoint) {
            let kind = await send(request)
            return (kind, AppleCallOutcome(kind))
        }
    }

    /// The request with one deadline for all of it (the pattern of
    /// `HTTPJWKSSource.fetchJWKS`): `execute`'s deadline only covers the
    /// head, so the body is collected inside a race against a sleep.
    private func send(_ request: HTTPClientRequest) async -> AppleAnswer.Kind {
        let (client, timeout) = (httpClient, self.timeout)
        let deadline = NIODeadline.now() + .nanoseconds(Int64(timeout / .nanoseconds(1)))
        return await withTaskGroup(of: AppleAnswer.Kind.self) { group in
            group.addTask {
                do {
                    let response = try await client.execute(request, deadline: deadline)
                    let body = try await response.body.collect(upTo: Self.maximumBodyBytes)
                    try Task.checkCancellation()
                    return AppleAnswer.sort(status: Int(response.status.code), headers: response.headers,
                                            body: Data(body.readableBytesView))
                } catch {
                    return .unavailable(retryAfter: nil, reason: AppleAnswer.describe(error, timeout: timeout))
                }
            }
            group.addTask {
                do {
                    try await Task.sleep(for: timeout)
                    return .unavailable(retryAfter: nil, reason: AppleAnswer.noAnswer(within: timeout))
                } catch {
                    return .unavailable(retryAfter: nil, reason: "cancelled")
                }
            }
            defer { group.cancelAll() }
            return await group.next() ?? .unavailable(retryAfter: nil, reason: "cancelled")
        }
    }
}
