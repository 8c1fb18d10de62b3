import CryptoExtras
import Foundation
import Logging
import Synchronization

/// Where Apple's JWKS document comes from: Apple's URL in production, a file
/// for offline `siwa verify`, the simulator's URL in tests.
public protocol JWKSSource: Sendable {
    /// The JWKS document (`{"keys": [...]}`), or an error.
    func fetchJWKS() async throws -> Data
    /// Where it comes from, for logs.
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
///
/// An unknown `kid` is final (`VerificationFailure.unknownKeyID`, a 400) only
/// when a fetch this call waited for succeeded and still lacks it. When the
/// cooldown forbids a refetch, or the refetch failed, it is "cannot decide
/// now" (`AppleKeysUnavailable`, a 503 that Apple retries): otherwise a
/// trickle of bogus kids, each restarting the cooldown, would make a genuine
/// notification signed with a freshly rotated key be refused for good.
///
/// A backend makes one per process and may call ``reload()`` at start-up
/// and run ``refreshPeriodically(every:retryAfterFailure:)`` in a task of its
/// own; without them the first verification fetches the keys.
public final class AppleKeySet: Sendable {
    /// The keys held at one moment.
    public struct Snapshot: Sendable {
        /// Apple's RS256 public keys, by `kid`.
        public var keys: [String: _RSA.Signing.PublicKey]
        /// When they were last installed; nil before the first successful fetch.
        public var loadedAt: ContinuousClock.Instant?
    }

    private struct RefreshState {
        /// The running fetch; its value says whether it succeeded.
        var inFlight: Task<Bool, Never>?
        /// When the last refetch for an unknown kid started (the cooldown
        /// is counted from it; scheduled reloads do not count).
        var lastUnknownKidFetch: ContinuousClock.Instant?
        var fetchCount = 0
    }

    /// Where the keys come from.
    public let source: any JWKSSource
    /// The shortest time between two refetches for unknown kids.
    public let refetchCooldown: Duration
    private let logger: Logger
    private let snapshot = Mutex(Snapshot(keys: [:], loadedAt: nil))
    private let refresh = Mutex(RefreshState())

    /// - Parameters:
    ///   - source: ``HTTPJWKSSource`` for Apple's URL, or ``StaticJWKS``.
    ///   - refetchCooldown: at most one refetch for an unknown `kid` per this
    ///     long, so tokens with invented kids cannot make you hammer Apple.
    ///   - logger: fetch failures and skipped keys (never a token).
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

    /// Whether a key set has been loaded (a readiness check).
    public var isLoaded: Bool { snapshot.withLock { $0.loadedAt != nil } }
    /// How long ago the keys held were loaded (nil: never): a refresh that
    /// keeps failing lets it grow past the refresh interval.
    public var age: Duration? { snapshot.withLock { $0.loadedAt.map { ContinuousClock.now - $0 } } }
    /// The kids held now, sorted.
    public var keyIDs: [String] { snapshot.withLock { $0.keys.keys.sorted() } }
    /// How many times the source was asked (tests and metrics).
    public var fetchCount: Int { refresh.withLock { $0.fetchCount } }

    /// The key for `kid`, refetching once if it is unknown.
    ///
    /// Throws `VerificationFailure.unknownKeyID` only when a fresh key set
    /// (fetched for this call, or by a fetch it joined) lacks the kid;
    /// `AppleKeysUnavailable` when that could not be checked now (no key set
    /// yet, the refetch failed, or the cooldown forbids a refetch).
    public func key(for kid: String) async throws -> _RSA.Signing.PublicKey {
        if let key = snapshot.withLock({ $0.keys[kid] }) { return key }
        let refetch = await refreshForUnknownKey()
        if let key = snapshot.withLock({ $0.keys[kid] }) { return key }
        guard isLoaded else { throw AppleKeysUnavailable("no key set has been loaded yet") }
        switch refetch {
        case .succeeded: throw VerificationFailure.unknownKeyID
        case .failed: throw AppleKeysUnavailable("the refetch for an unknown kid failed")
        case .coolingDown: throw AppleKeysUnavailable("an unknown kid arrived during the refetch cooldown")
        }
    }

    /// Fetch now, unconditionally (start-up and the periodic refresh);
    /// joins a fetch already running. Returns whether it succeeded; a failed
    /// fetch keeps the keys held.
    @discardableResult
    public func reload() async -> Bool {
        let task = refresh.withLock { state -> Task<Bool, Never> in
            if let running = state.inFlight { return running }
            let task = Task { await self.fetchAndInstall() }
            state.inFlight = task
            return task
        }
        return await task.value
    }

    /// Refresh every `interval` until the task is cancelled; retries a failed
    /// load sooner, so a server started while Apple is unreachable recovers.
    public func refreshPeriodically(every interval: Duration, retryAfterFailure: Duration = .seconds(5)) async {
        while !Task.isCancelled {
            let ok = await reload()
            do { try await Task.sleep(for: ok ? interval : retryAfterFailure) } catch { return }
        }
    }

    private enum RefetchOutcome { case succeeded, failed, coolingDown }

    /// Refetch for an unknown kid, or join the fetch already running;
    /// `.coolingDown` when the cooldown forbids one.
    private func refreshForUnknownKey() async -> RefetchOutcome {
        let task = refresh.withLock { state -> Task<Bool, Never>? in
            if let running = state.inFlight { return running }
            if let last = state.lastUnknownKidFetch, ContinuousClock.now - last < refetchCooldown { return nil }
            state.lastUnknownKidFetch = .now
            let task = Task { await self.fetchAndInstall() }
            state.inFlight = task
            return task
        }
        guard let task else { return .coolingDown }
        return await task.value ? .succeeded : .failed
    }

    private func fetchAndInstall() async -> Bool {
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
        refresh.withLock { $0.inFlight = nil }
        return !failed
    }

    /// Replace the key set with the usable RSA keys of a JWKS document; the
    /// entries skipped are logged as warnings.
    @discardableResult
    public func install(jwks data: Data) throws -> Int {
        let parsed = try Self.parseReporting(jwks: data)
        for skipped in parsed.skipped {
            logger.warning("Skipped a key of Apple's key set", metadata: ["key": "\(skipped)", "source": "\(source.description)"])
        }
        snapshot.withLock { $0 = Snapshot(keys: parsed.keys, loadedAt: .now) }
        return parsed.keys.count
    }

    /// The usable keys of a JWKS document, and why each other entry was skipped.
    public struct ParsedJWKS: Sendable {
        /// The usable keys, by `kid`.
        public var keys: [String: _RSA.Signing.PublicKey]
        /// One line per entry skipped: its position, its kid (sanitized) and why.
        public var skipped: [String]
    }

    /// The RS256 signature keys of a JWKS document.
    public static func parse(jwks data: Data) throws -> [String: _RSA.Signing.PublicKey] {
        try parseReporting(jwks: data).keys
    }

    /// The RS256 signature keys of a JWKS document. An entry siwa cannot use
    /// (another key type or algorithm, an encryption key, no kid, bad
    /// base64url, an RSA key under 2048 bits or otherwise refused) is skipped
    /// and reported, not fatal to the others; a document with no usable key
    /// is an error, so a broken answer from Apple never empties the cache.
    public static func parseReporting(jwks data: Data) throws -> ParsedJWKS {
        let document: LenientJWKS
        do { document = try JSONDecoder().decode(LenientJWKS.self, from: data) } catch {
            throw JWKSError("not a JWKS document (\(AppleTokenVerifier.describe(error)))")
        }
        var parsed = ParsedJWKS(keys: [:], skipped: [])
        for (index, entry) in document.keys.enumerated() {
            let label = "#\(index) kid \(VerificationFailure.printable(String((entry?.kid ?? "-").prefix(64))))"
            switch Self.key(of: entry) {
            case .success(let usable):
                if parsed.keys[usable.kid] != nil {
                    parsed.skipped.append("\(label): the kid appears twice; the first is kept")
                } else {
                    parsed.keys[usable.kid] = usable.key
                }
            case .failure(let why):
                parsed.skipped.append("\(label): \(why.description)")
            }
        }
        guard !parsed.keys.isEmpty else {
            throw JWKSError("no usable RS256 key with a kid in the document" +
                            (parsed.skipped.isEmpty ? "" : " (skipped: \(parsed.skipped.joined(separator: "; ")))"))
        }
        return parsed
    }

    private struct UsableKey {
        let kid: String
        let key: _RSA.Signing.PublicKey
    }

    private static func key(of entry: LenientJWK?) -> Result<UsableKey, JWKSError> {
        guard let entry else { return .failure(JWKSError("not a JSON object with string members")) }
        guard entry.kty == "RSA" else { return .failure(JWKSError("key type is not RSA")) }
        if let use = entry.use, use != "sig" { return .failure(JWKSError("use is not sig")) }
        if let alg = entry.alg, alg != "RS256" { return .failure(JWKSError("alg is not RS256")) }
        guard let kid = entry.kid, !kid.isEmpty else { return .failure(JWKSError("no kid")) }
        guard let n = entry.n.flatMap(Base64URL.decode), let e = entry.e.flatMap(Base64URL.decode), !n.isEmpty, !e.isEmpty else {
            return .failure(JWKSError("n or e is missing or not base64url"))
        }
        do {
            return .success(UsableKey(kid: kid, key: try _RSA.Signing.PublicKey(n: n, e: e)))
        } catch {
            return .failure(JWKSError("the RSA key is refused (\(n.count * 8)-bit modulus; at least 2048 bits needed)"))
        }
    }
}

/// `{"keys": [...]}`, read without failing on any one entry: each entry
/// decodes to nil (not an object) or to its string members (others nil).
private struct LenientJWKS: Decodable {
    let keys: [LenientJWK?]

    enum CodingKeys: String, CodingKey { case keys }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        var list = try container.nestedUnkeyedContainer(forKey: .keys)
        var keys: [LenientJWK?] = []
        while !list.isAtEnd {
            if (try? list.decodeNil()) == true {
                keys.append(nil)
            } else if let key = try? list.decode(LenientJWK.self) {
                keys.append(key)
            } else {
                // A failed decode does not advance the container: step over it.
                keys.append(nil)
                guard (try? list.decode(Skipped.self)) != nil else { break }
            }
        }
        self.keys = keys
    }

    /// Consumes one element of any type.
    private struct Skipped: Decodable {
        init(from decoder: any Decoder) throws {}
    }
}

private struct LenientJWK: Decodable {
    let kty, kid, use, alg, n, e: String?

    enum CodingKeys: String, CodingKey { case kty, kid, use, alg, n, e }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func text(_ key: CodingKeys) -> String? { try? container.decodeIfPresent(String.self, forKey: key) }
        kty = text(.kty)
        kid = text(.kid)
        use = text(.use)
        alg = text(.alg)
        n = text(.n)
        e = text(.e)
    }
}

/// A key set could not be fetched or read: what went wrong, in a few words.
public struct JWKSError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A JWKS document held in memory (from a file or a fixture).
public struct StaticJWKS: JWKSSource {
    /// The document, `{"keys": [...]}`.
    public let data: Data
    public init(data: Data) { self.data = data }
    /// The document, every time.
    public func fetchJWKS() async throws -> Data { data }
    /// "static JWKS".
    public var description: String { "static JWKS" }
}
