import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// A stand-in for Apple on loopback, for the tests, `siwa-demo` and
/// `siwa-bench`: its own RSA keys, a JWKS endpoint (`GET /auth/keys`), and
/// signed notifications and identity tokens (the callers POST them to siwa
/// in Apple's body, `body(for:)`), and `/auth/token` and `/auth/revoke`
/// (SimulatedTokenEndpoint.swift).
public final class AppleSimulator: Sendable {
    private struct State {
        var published: [SimulatedKey]
        var jwksRequests = 0
        var jwksFailing = false
        /// When set, `/auth/keys` serves this document instead of our keys
        /// (Apple's real historical key sets, for rotation tests).
        var servedDocument: Data?
    }

    private let state: Mutex<State>
    public let signer = TokenSigner()
    /// Clients, codes, tokens and failure injection of the token endpoints.
    let tokenState = Mutex(TokenEndpointState())

    /// - Parameter keyCount: keys published at the start (Apple publishes 3 to 5).
    public init(keyCount: Int = 2) throws {
        state = Mutex(State(published: try (0..<keyCount).map { try SimulatedKey(kid: "SIM\($0)" + Self.randomKid(4)) }))
    }

    public var keys: [SimulatedKey] { state.withLock { $0.published } }
    public var currentKey: SimulatedKey { state.withLock { $0.published[0] } }
    /// How many times `/auth/keys` was requested.
    public var jwksRequests: Int { state.withLock { $0.jwksRequests } }

    /// Make `/auth/keys` answer 503 (Apple unreachable) or recover.
    public func setJWKSFailing(_ failing: Bool) { state.withLock { $0.jwksFailing = failing } }

    /// Publish a new key first in the set (Apple rotates without notice); returns it.
    @discardableResult
    public func rotate() throws -> SimulatedKey {
        let key = try SimulatedKey(kid: "ROT" + Self.randomKid(7))
        state.withLock { $0.published.insert(key, at: 0) }
        return key
    }

    /// Sign with a key that is not (yet) published.
    public func unpublishedKey() throws -> SimulatedKey { try SimulatedKey(kid: "NEW" + Self.randomKid(7)) }

    public func publish(_ key: SimulatedKey) { state.withLock { $0.published.insert(key, at: 0) } }

    /// Serve a given JWKS document (e.g. one of Apple's real snapshots), or nil for our own keys.
    public func serve(document: Data?) { state.withLock { $0.servedDocument = document } }

    public var jwksJSON: Data {
        let keys = state.withLock { $0.published.map(\.jwk) }
        return (try? JSONSerialization.data(withJSONObject: ["keys": keys], options: [.sortedKeys])) ?? Data()
    }

    /// A signed notification, as Apple would send it.
    public func notification(
        type: String, sub: String, audience: String, jti: String = UUID().uuidString,
        issuedAt: Date = Date(), eventTime: Date? = nil, email: String? = nil, isPrivateEmail: Bool? = nil,
        key: SimulatedKey? = nil
    ) throws -> String {
        let key = key ?? currentKey
        let claims = TokenSigner.notificationClaims(type: type, sub: sub, audience: audience, jti: jti, issuedAt: issuedAt,
                                                    eventTime: eventTime, email: email, isPrivateEmail: isPrivateEmail)
        return try signer.sign(header: ["kid": key.kid, "alg": "RS256"], claims: claims, key: key)
    }

    /// A signed identity token.
    public func identityToken(sub: String, audience: String, issuedAt: Date = Date(), email: String? = nil,
                              nonce: String? = nil, key: SimulatedKey? = nil) throws -> String {
        let key = key ?? currentKey
        let claims = TokenSigner.identityClaims(sub: sub, audience: audience, issuedAt: issuedAt, email: email, nonce: nonce)
        return try signer.sign(header: ["kid": key.kid, "alg": "RS256"], claims: claims, key: key)
    }

    /// The body Apple POSTs: `{"payload": "<JWS>"}`.
    public static func body(for token: String) -> Data {
        (try? JSONSerialization.data(withJSONObject: ["payload": token])) ?? Data()
    }

    static func randomKid(_ length: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<length).map { _ in alphabet.randomElement() ?? "A" })
    }

    // MARK: HTTP

    func router() -> Router<SimulatorRequestContext> {
        let router = Router(context: SimulatorRequestContext.self)
        router.get("/auth/keys") { _, _ -> Response in
            let (failing, document) = self.state.withLock { state -> (Bool, Data?) in
                state.jwksRequests += 1
                return (state.jwksFailing, state.servedDocument)
            }
            if failing { return Response(status: .serviceUnavailable) }
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: document ?? self.jwksJSON)))
        }
        addTokenRoutes(to: router)
        addAuthorizeRoute(to: router)
        addNotifyRoute(to: router)
        return router
    }

    /// Serve on `host:port` (0 picks a free port) until `stop()`: loopback,
    /// unless a container must be reached from others (`siwa-demo simulator`).
    public func start(host: String = "127.0.0.1", port: Int = 0,
                      logger: Logger = Logger(label: "apple-simulator")) async throws -> RunningServer {
        tokenState.withLock { $0.logger = logger }
        return try await RunningServer.start(router: router(), host: host, port: port, logger: logger)
    }
}

/// A Hummingbird server running in a task, with the port it bound.
public final class RunningServer: Sendable {
    public let port: Int
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    init(port: Int, group: ServiceGroup, task: Task<Void, any Error>) {
        self.port = port
        self.group = group
        self.task = task
    }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    public static func start<Context: RequestContext>(router: Router<Context>, host: String = "127.0.0.1", port: Int,
                                                      logger: Logger) async throws -> RunningServer
    where Context.Source == ApplicationRequestContextSource {
        let bound = OneShotPort()
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "apple-simulator"),
            onServerRunning: { channel in bound.set(channel.localAddress?.port ?? port) },
            logger: logger
        )
        let group = ServiceGroup(services: [app], gracefulShutdownSignals: [], logger: logger)
        // A server that cannot bind (the port taken) ends at once: its
        // error is the caller's, rather than a wait for a port never bound.
        let task = Task {
            do { try await group.run() } catch {
                bound.fail(error)
                throw error
            }
            bound.fail(ServerEndedBeforeListening())
        }
        return RunningServer(port: try await bound.value(), group: group, task: task)
    }

    /// Graceful (open requests finish, idle connections close), cancelled
    /// after 2 s; a plain cancel makes Hummingbird log errors for each open
    /// connection.
    public func stop() async {
        await group.triggerGracefulShutdown()
        let task = self.task
        let deadline = Task {
            try await Task.sleep(for: .seconds(2))
            task.cancel()
        }
        _ = try? await task.value
        deadline.cancel()
    }
}

/// The port a server bound, or why it did not, delivered once.
final class OneShotPort: Sendable {
    private let state = Mutex<(Result<Int, any Error>?, [CheckedContinuation<Int, any Error>])>((nil, []))

    func set(_ port: Int) { complete(.success(port)) }

    func fail(_ error: any Error) { complete(.failure(error)) }

    private func complete(_ result: Result<Int, any Error>) {
        let waiters = state.withLock { state -> [CheckedContinuation<Int, any Error>] in
            guard state.0 == nil else { return [] }
            state.0 = result
            defer { state.1 = [] }
            return state.1
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    func value() async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            let result = state.withLock { state -> Result<Int, any Error>? in
                if let result = state.0 { return result }
                state.1.append(continuation)
                return nil
            }
            if let result { continuation.resume(with: result) }
        }
    }
}

/// A server's task ended without an error and without having listened.
struct ServerEndedBeforeListening: Error, CustomStringConvertible {
    var description: String { "the server stopped before it listened" }
}
