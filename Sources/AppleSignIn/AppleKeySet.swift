import CryptoExtras
import Foundation
import JWTKit
import Logging
import Synchronization

/// Where Apple's JWKS document comes from: Apple's URL in production, a file
/// for offline `siwa verify`, the simulator's URL in tests.
public protocol JWKSSource: Sendable {
    func fetchJWKS() async throws -> Data
    var description: String { get }
}

/// Apple's public signing keys, by `kid`.
///
/// Reads are lock-protected dictionary look-ups, so verification on many
/// request threads never queues behind an actor. A `kid` we do not know
/// triggers one refetch (single flight: concurrent callers wait for the same
/// fetch), and at most one refetch per `refetchCooldown`, so a flood of
/// tokens with invented kids cannot make us hammer Apple. A failed fetch
/// keeps the keys we had.
public final class AppleKeySet: Sendable {
    public struct Snapshot: Sendable {
        public var keys: [String: _RSA.Signing.PublicKey]
        public var loadedAt: ContinuousClock.Instant?
    }

    private struct RefreshState {
        var inFlight: Task<Void, Never>?
        /// When the last refetch for an unknown kid started (the cooldown
        /// is counted from it; scheduled reloads do not count).
        var lastUnknownKidFetch: ContinuousClock.Instant?
        var lastAttemptFailed = false
        var fetchCount = 0
    }

    public let source: any JWKSSource
    public let refetchCooldown: Duration
    private let logger: Logger
    private let snapshot = Mutex(Snapshot(keys: [:], loadedAt: nil))
    private let refresh = Mutex(RefreshState())

    public init(source: any JWKSSource, refetchCooldown: Duration = .seconds(30), logger: Logger) {
        self.source = source
        self.refetchCooldown = refetchCooldown
        self.logger = logger
    }

    /// Keys given up front (a JWKS file, a test snapshot).
    public convenience init(jwks: Data, logger: Logger) throws {
        self.init(source: StaticJWKS(data: jwks), logger: logger)
        try self.install(jwks: jwks)
    }

    public var isLoaded: Bool { snapshot.withLock { $0.loadedAt != nil } }
    public var keyIDs: [String] { snapshot.withLock { $0.keys.keys.sorted() } }
    /// How many times the source was asked (tests and metrics).
    public var fetchCount: Int { refresh.withLock { $0.fetchCount } }

    /// The key for `kid`, refetching once if it is unknown.
    public func key(for kid: String) async throws -> _RSA.Signing.PublicKey {
        if let key = snapshot.withLock({ $0.keys[kid] }) { return key }
        let refetched = await refreshForUnknownKey()
        if let key = snapshot.withLock({ $0.keys[kid] }) { return key }
        guard isLoaded else { throw AppleKeysUnavailable("no key set has been loaded yet") }
        // Only a refetch this call waited for, and that failed, means "cannot
        // decide now"; inside the cooldown an unknown kid is simply unknown.
        if refetched, refresh.withLock({ $0.lastAttemptFailed }) {
            throw AppleKeysUnavailable("the refetch for an unknown kid failed")
        }
        throw VerificationFailure.unknownKeyID
    }

    /// Fetch now, unconditionally (start-up and the periodic refresh).
    @discardableResult
    public func reload() async -> Bool {
        let task = refresh.withLock { state -> Task<Void, Never> in
            if let running = state.inFlight { return running }
            let task = Task { await self.fetchAndInstall() }
            state.inFlight = task
            return task
        }
        await task.value
        return !refresh.withLock { $0.lastAttemptFailed }
    }

    /// Refresh every `interval` until the task is cancelled; retries a failed
    /// load sooner, so a server started while Apple is unreachable recovers.
    public func refreshPeriodically(every interval: Duration, retryAfterFailure: Duration = .seconds(5)) async {
        while !Task.isCancelled {
            let ok = await reload()
            do { try await Task.sleep(for: ok ? interval : retryAfterFailure) } catch { return }
        }
    }

    /// Returns whether a fetch ran (or was joined) for this call.
    private func refreshForUnknownKey() async -> Bool {
        let task = refresh.withLock { state -> Task<Void, Never>? in
            if let running = state.inFlight { return running }
            if let last = state.lastUnknownKidFetch, ContinuousClock.now - last < refetchCooldown { return nil }
            state.lastUnknownKidFetch = .now
            let task = Task { await self.fetchAndInstall() }
            state.inFlight = task
            return task
        }
        guard let task else { return false }
        await task.value
        return true
    }

    private func fetchAndInstall() async {
        refresh.withLock { $0.fetchCount += 1 }
        var failed = false
        do {
            let data = try await source.fetchJWKS()
            let count = try install(jwks: data)
            logger.info("Loaded Apple signing keys", metadata: ["keys": "\(count)", "source": "\(source.description)"])
        } catch {
            failed = true
            logger.warning("Could not load Apple signing keys; keeping the previous set",
                           metadata: ["source": "\(source.description)", "error": "\(error)"])
        }
        refresh.withLock {
            $0.lastAttemptFailed = failed
            $0.inFlight = nil
        }
    }

    /// Replace the key set with the RSA keys of a JWKS document.
    @discardableResult
    public func install(jwks data: Data) throws -> Int {
        let keys = try Self.parse(jwks: data)
        snapshot.withLock { $0 = Snapshot(keys: keys, loadedAt: .now) }
        return keys.count
    }

    /// The RSA signature keys of a JWKS document. Keys of other types or uses
    /// are skipped; a document with no usable key is an error, so a broken
    /// answer from Apple never empties the cache.
    public static func parse(jwks data: Data) throws -> [String: _RSA.Signing.PublicKey] {
        let jwks: JWKS
        do { jwks = try JSONDecoder().decode(JWKS.self, from: data) } catch {
            throw JWKSError("not a JWKS document (\(error))")
        }
        var keys: [String: _RSA.Signing.PublicKey] = [:]
        for jwk in jwks.keys where jwk.keyType == .rsa {
            guard let kid = jwk.keyIdentifier?.string,
                  let n = jwk.modulus.flatMap(Base64URL.decode),
                  let e = jwk.exponent.flatMap(Base64URL.decode) else { continue }
            if let alg = jwk.algorithm, alg != .rs256 { continue }
            keys[kid] = try _RSA.Signing.PublicKey(n: n, e: e)
        }
        guard !keys.isEmpty else { throw JWKSError("no RS256 keys with a kid in the document") }
        return keys
    }
}

public struct JWKSError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A JWKS document held in memory (from a file or a fixture).
public struct StaticJWKS: JWKSSource {
    public let data: Data
    public init(data: Data) { self.data = data }
    public func fetchJWKS() async throws -> Data { data }
    public var description: String { "static JWKS" }
}
