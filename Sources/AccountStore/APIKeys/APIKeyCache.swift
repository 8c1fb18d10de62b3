import Foundation
import Synchronization

/// The API keys this `siwa serve` verified lately, so that a request with a
/// known key costs no database round trip (a sign-in made three; the key's
/// was one of them).
///
/// It is only as fresh as what it is told: sql/013's triggers NOTIFY
/// `siwa_api_keys` at the commit of every revoke, rename, re-scope, delete
/// or truncate, and `APIKeyChangeListener` (SIWAServer) LISTENs for it.
/// So entries are kept only while that LISTEN is up; each notification
/// empties the cache, and losing the LISTEN connection empties it and turns
/// it off until LISTEN is back. A revoked key stops working on every
/// instance within milliseconds of the commit. Unknown, revoked or wrong
/// keys are never cached: a new key works at once, a bad one always asks.
///
/// A LISTEN connection can also die silently (a peer gone without a FIN, a
/// firewall dropping the flow): nothing tells the listener, and a revoke's
/// NOTIFY never arrives. So the listener NOTIFYs a heartbeat on the same
/// channel (`heartbeatPayload`, every `Heartbeat.interval`), and the cache
/// serves entries only while something was heard on the LISTEN within
/// `Heartbeat.timeout`: past that it is off (every request asks the
/// database) until the listener hears again.
public final class APIKeyCache: Sendable {
    /// How often the listener NOTIFYs its heartbeat, and how long the cache
    /// trusts a LISTEN that has heard nothing.
    public struct Heartbeat: Sendable {
        public var interval: Duration
        public var timeout: Duration

        public init(interval: Duration, timeout: Duration) {
            self.interval = interval
            self.timeout = timeout
        }

        /// A revoked key stops working within 30 s even when the LISTEN died silently.
        public static let standard = Heartbeat(interval: .seconds(10), timeout: .seconds(30))
    }

    struct Entry: Sendable {
        let identity: APIKeyIdentity
        let secretSHA256: Data
        let storedAt: ContinuousClock.Instant
    }

    private struct State {
        var listening = false
        /// When the LISTEN last heard anything (a heartbeat, a change, or
        /// the server's confirmation of the LISTEN itself).
        var lastHeard: ContinuousClock.Instant?
        /// Bumped by every change and by LISTEN starting or stopping: a
        /// lookup that began before a change does not store what it read.
        var generation: UInt64 = 0
        var entries: [String: Entry] = [:]
    }

    private let state = Mutex(State())
    /// A key is asked again at least this often, whatever was announced.
    static let lifetime = Duration.seconds(300)
    /// More live keys than this is not a sign-in backend's pattern: emptied, not grown.
    static let maximumEntries = 1024

    public let heartbeat: Heartbeat

    public init(heartbeat: Heartbeat = .standard) {
        self.heartbeat = heartbeat
    }

    /// Listening, and heard from within the heartbeat's timeout.
    private func live(_ state: State, at now: ContinuousClock.Instant) -> Bool {
        guard state.listening, let heard = state.lastHeard else { return false }
        return now - heard < heartbeat.timeout
    }

    /// The cached key with `prefix`, nil when not cached (or not listening).
    func entry(prefix: String) -> Entry? {
        let now = ContinuousClock.now
        return state.withLock { state in
            guard live(state, at: now), let entry = state.entries[prefix], now - entry.storedAt < Self.lifetime else { return nil }
            return entry
        }
    }

    /// Taken before a database lookup; nil while nothing would keep the
    /// cache fresh (then the lookup's answer is not stored).
    func generation() -> UInt64? {
        let now = ContinuousClock.now
        return state.withLock { live($0, at: now) ? $0.generation : nil }
    }

    /// Stores a live key read from the database, unless a change (or a lost
    /// LISTEN) came between the lookup's start and now.
    func store(_ identity: APIKeyIdentity, prefix: String, secretSHA256: Data, readAt generation: UInt64) {
        let now = ContinuousClock.now
        state.withLock { state in
            guard live(state, at: now), state.generation == generation else { return }
            if state.entries.count >= Self.maximumEntries { state.entries.removeAll() }
            state.entries[prefix] = Entry(identity: identity, secretSHA256: secretSHA256, storedAt: now)
        }
    }

    /// A key changed somewhere (a NOTIFY on `siwa_api_keys`).
    public func keysChanged() {
        let now = ContinuousClock.now
        state.withLock { state in
            state.generation &+= 1
            state.entries.removeAll()
            state.lastHeard = now
        }
    }

    /// A heartbeat came through the LISTEN: it is alive. If it had gone
    /// quiet past the timeout, what is cached may have missed a change: emptied.
    public func heard() {
        let now = ContinuousClock.now
        state.withLock { state in
            if !live(state, at: now) {
                state.generation &+= 1
                state.entries.removeAll()
            }
            state.lastHeard = now
        }
    }

    /// Listening, but nothing heard within the heartbeat's timeout: the
    /// LISTEN connection is presumed dead (the listener replaces it).
    public var heartbeatLost: Bool {
        let now = ContinuousClock.now
        return state.withLock { $0.listening && !live($0, at: now) }
    }

    /// LISTEN is up (true; only after the server confirmed it) or was lost.
    /// Either way what is cached may have missed a change: emptied.
    public func setListening(_ listening: Bool) {
        let now = ContinuousClock.now
        state.withLock { state in
            state.listening = listening
            state.lastHeard = listening ? now : nil
            state.generation &+= 1
            state.entries.removeAll()
        }
    }

    /// The payload of the listener's heartbeat NOTIFY (sql/013's triggers send '').
    public static let heartbeatPayload = "heartbeat"

    /// The channel sql/013's triggers NOTIFY.
    public static let channel = "siwa_api_keys"

    /// How many keys are cached (tests).
    public var count: Int { state.withLock { $0.entries.count } }
}
