import AsyncHTTPClient
import Foundation
import NIOCore
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime

/// The app's backend calling siwa's `/v1` (docs/client.md): sign-in (an
/// app's identity token and code, or a web client's code alone), a user's
/// record, and the in-app account deletion. The calls are generated from
/// docs/openapi.yaml (`Client`, in Generated/); this adds the API key, the
/// retry rule for 503 (`RetryPolicy`), a deadline on every call, and siwa's
/// refusals as one error (`SIWARefusal`).
public struct SIWAClient: Sendable {
    /// The request `POST /v1/sign-in` takes: what Apple handed the app.
    public typealias SignInRequest = Components.Schemas.SignInRequest
    /// The signed-in user, as `POST /v1/sign-in` answers.
    public typealias SignedInUser = Components.Schemas.SignedInUser
    /// What siwa knows of a user (`GET /v1/users/{apple_sub}`).
    public typealias User = Components.Schemas.User
    /// An old sub's new one, for 60 days after an app transfer.
    public typealias MovedUser = Components.Schemas.MovedUser
    /// The answer to `DELETE /v1/users/{apple_sub}`.
    public typealias Deletion = Components.Schemas.Deletion

    public struct Configuration: Sendable {
        public var retry: RetryPolicy
        /// Each attempt's wait for the answer's head. siwa's sign-in may
        /// wait on Apple for SIWA_APPLE_REQUEST_TIMEOUT_SECONDS (10 s) before
        /// it answers 503: keep this above it.
        public var attemptTimeout: Duration
        /// The whole call: every attempt, the waits between them, the bodies.
        public var deadline: Duration

        public init(retry: RetryPolicy = RetryPolicy(), attemptTimeout: Duration = .seconds(15), deadline: Duration = .seconds(30)) {
            self.retry = retry
            self.attemptTimeout = attemptTimeout
            self.deadline = deadline
        }
    }

    /// The generated client, with the middlewares.
    let client: Client
    public let configuration: Configuration

    /// - Parameters:
    ///   - apiURL: siwa's API listener (`SIWA_API_HTTP_HOST`:`SIWA_API_HTTP_PORT`,
    ///     `http://127.0.0.1:8082` unless set), reached over loopback or the private network.
    ///   - apiKey: an app key (`siwa api-keys create NAME`).
    ///   - httpClient: shared with the rest of the backend; its lifetime is the caller's.
    ///   - middlewares: yours (logging, metrics, tracing), each seeing every
    ///     attempt as it goes to siwa and its answer as it comes back.
    public init(apiURL: URL, apiKey: String, configuration: Configuration = Configuration(), httpClient: HTTPClient = .shared,
                middlewares: [any ClientMiddleware] = []) {
        self.configuration = configuration
        let transport = AsyncHTTPClientTransport(configuration: .init(client: httpClient, timeout: TimeAmount(configuration.attemptTimeout)))
        client = Client(
            serverURL: apiURL,
            configuration: OpenAPIRuntime.Configuration(dateTranscoder: SIWADateTranscoder()),
            transport: transport,
            middlewares: [BearerMiddleware(apiKey: apiKey), RefusalMiddleware(),
                          RetryMiddleware(policy: configuration.retry, deadline: configuration.deadline)] + middlewares)
    }

    /// `POST /v1/sign-in`. Throws `SIWARefusal` for siwa's refusals (400
    /// with the token's or the code's reason, 409 `stale_identity_token`:
    /// the app must sign in with Apple again, 409 `deletion_in_progress`,
    /// 503 once the retries are spent), `SIWAClientError` otherwise.
    public func signIn(_ request: SignInRequest) async throws -> SignedInUser {
        try await call {
            switch try await $0.signIn(body: .json(request)) {
            case .ok(let ok): try ok.body.json
            case let other: throw Self.unexpected(other)
            }
        }
    }

    /// Which team's user a sub names (Apple's subs are team-scoped): by
    /// team, by a client id of the team, or (nil) the one team siwa serves.
    public enum Team: Sendable, Equatable {
        case team(String)
        case clientID(String)
    }

    /// What `GET /v1/users/{apple_sub}` found.
    public enum UserLookup: Sendable, Hashable {
        case found(User)
        /// An app transfer moved the user (answered for 60 days after it).
        case moved(MovedUser)
        case notFound

        /// The user, when found.
        public var user: User? {
            if case .found(let user) = self { return user }
            return nil
        }
    }

    /// `GET /v1/users/{apple_sub}`.
    public func user(appleSub: String, in team: Team? = nil) async throws -> UserLookup {
        do {
            return try await call {
                switch try await $0.getUser(path: .init(appleSub: appleSub), query: Self.query(team)) {
                case .ok(let ok):
                    switch try ok.body.json {
                    case .User(let user): .found(user)
                    case .MovedUser(let moved): .moved(moved)
                    }
                case let other: throw Self.unexpected(other)
                }
            }
        } catch let refusal as SIWARefusal where refusal.status == 404 {
            return .notFound
        }
    }

    /// `DELETE /v1/users/{apple_sub}`: the user deleted their account in
    /// the app. The scheduled purge (`status` `deletion_scheduled`; the same
    /// job again while it is pending), or `deleted` for a user purged
    /// before; nil for a user siwa does not know. With
    /// `appleRevocation == .manual` siwa holds no token to revoke: show the
    /// user `appleRevocationUrl`.
    public func deleteUser(appleSub: String, in team: Team? = nil) async throws -> Deletion? {
        do {
            return try await call {
                switch try await $0.deleteUser(path: .init(appleSub: appleSub), query: Self.deleteQuery(team)) {
                case .ok(let ok): try ok.body.json
                case .accepted(let accepted): try accepted.body.json
                case let other: throw Self.unexpected(other)
                }
            }
        } catch let refusal as SIWARefusal where refusal.status == 404 {
            return nil
        }
    }

    /// Runs one call within the deadline; the runtime's wrapping of the
    /// middlewares' and the transport's errors taken off.
    func call<T: Sendable>(_ body: @escaping @Sendable (Client) async throws -> T) async throws -> T {
        let client = self.client
        do {
            return try await withDeadline(configuration.deadline) { try await body(client) }
        } catch let error as ClientError {
            switch error.underlyingError {
            case let refusal as SIWARefusal: throw refusal
            case let clientError as SIWAClientError: throw clientError
            case let httpError as HTTPClientError where httpError == .deadlineExceeded:
                throw SIWAClientError.timedOut(after: configuration.attemptTimeout)
            case let other where error.response == nil: throw SIWAClientError.unreachable("\(other)")
            default: throw SIWAClientError.unexpectedAnswer(status: error.response?.status.code ?? 0, detail: error.causeDescription)
            }
        }
    }

    static func unexpected(_ output: some Sendable) -> SIWAClientError {
        SIWAClientError.unexpectedAnswer(status: 0, detail: "\(output)")
    }

    private static func query(_ team: Team?) -> Operations.GetUser.Input.Query {
        switch team {
        case .team(let team): .init(team: team)
        case .clientID(let clientID): .init(clientId: clientID)
        case nil: .init()
        }
    }

    private static func deleteQuery(_ team: Team?) -> Operations.DeleteUser.Input.Query {
        switch team {
        case .team(let team): .init(team: team)
        case .clientID(let clientID): .init(clientId: clientID)
        case nil: .init()
        }
    }
}
