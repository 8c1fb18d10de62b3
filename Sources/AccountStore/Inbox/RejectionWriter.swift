import Crypto
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// `siwa.rejected_notifications`: why a delivery was refused, with the
/// body's SHA-256 and size only; the token and anything personal stay out.
///
/// Junk costs no transaction of its own: a refusal is queued (in memory,
/// bounded) and a writer inserts what is queued in one statement every
/// `flushInterval`, on a small pool of its own so a flood cannot take the
/// connections genuine notifications need. Past `perMinute` refusals in a
/// minute (which also bounds the queue) the rest are only counted: one
/// summary row per minute (reason `over_rate_limit`, `occurrences` = how
/// many, `detail` = the count per reason) stands for them. Rows past
/// their retention are pruned by the worker (`RejectionRetention`).
///
/// What is queued and not yet written is lost if the process dies: these
/// are refusals, and the sender (Apple) retries whatever it meant.
public final class RejectionWriter: Sendable {
    public struct Options: Sendable {
        /// Refusals stored one by one per minute; more are only counted.
        public var perMinute = 6_000
        public var flushInterval: Duration = .milliseconds(100)
        /// Rows per INSERT at most.
        public var maxBatch = 1_000
        public init() {}
    }

    struct Row: Sendable {
        var at: Date
        var reason: String
        var detail: String?
        var bodySHA256: String?
        var bodyBytes: Int64
        var occurrences: Int64 = 1
    }

    private struct State {
        var queue: [Row] = []
        /// The minute (since the epoch) being counted, how many of it were
        /// queued, and the ones only counted, by reason.
        var minute: Int64 = 0
        var queuedThisMinute = 0
        /// Refusals in the current second (stored or not), and the last
        /// second that had more than the flood threshold, for `isFlooded`.
        var second: Int64 = 0
        var thisSecond = 0
        var lastFloodSecond: Int64?
        var overflow: [String: Int64] = [:]
        var closed = false
    }

    private let client: PostgresClient
    private let options: Options
    private let logger: Logger
    private let state = Mutex(State())
    private let now: @Sendable () -> Date
    private let countUnrecorded: @Sendable (Int) -> Void

    /// - Parameter countUnrecorded: told of refusals that go into a summary
    ///   row instead of a row of their own (a metric).
    public init(client: PostgresClient, options: Options = .init(), logger: Logger,
                now: @escaping @Sendable () -> Date = { Date() },
                countUnrecorded: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.client = client
        self.options = options
        self.logger = logger
        self.now = now
        self.countUnrecorded = countUnrecorded
    }

    /// Queue one refusal; never waits. Returns false when it was only
    /// counted (past the minute's limit, or shutting down).
    /// - Parameter byteCount: the body's size when it was not read whole
    ///   (its Content-Length); by default the size of `body`.
    @discardableResult
    public func record(reason: String, detail: String?, body: some DataProtocol, byteCount: Int64? = nil) -> Bool {
        let at = now()
        let minute = Int64(at.timeIntervalSince1970 / 60)
        let second = Int64(at.timeIntervalSince1970)
        let admitted = state.withLock { state -> Bool in
            if state.closed { return false }
            if state.second != second { (state.second, state.thisSecond) = (second, 0) }
            state.thisSecond += 1
            if state.thisSecond > floodThreshold { state.lastFloodSecond = second }
            rollOver(&state, to: minute)
            guard state.queuedThisMinute < options.perMinute else {
                state.overflow[reason, default: 0] += 1
                return false
            }
            state.queuedThisMinute += 1
            return true
        }
        guard admitted else {
            countUnrecorded(1)
            return false
        }
        // Hashed outside the lock; queued after (a row may land a few
        // microseconds out of order, which received_at does not promise).
        let row = Row(at: at, reason: Self.printable(reason, limit: 64), detail: detail.map { Self.printable($0, limit: 200) },
                      bodySHA256: SHA256.hash(data: Data(body)).hexLowercased,
                      bodyBytes: byteCount ?? Int64(body.count))
        state.withLock { $0.queue.append(row) }
        return true
    }

    /// Refusals arrived faster than `perMinute` spread over the minute (more
    /// than perMinute/60 in one second) at some point in the last
    /// `floodMemorySeconds`: a flood. The HTTP layer then holds its refusals (see
    /// FloodTarpit). It stays a flood for that long because holding the
    /// answers is what brings the rate down: the senders would be back at
    /// full speed the moment it ended.
    public var isFlooded: Bool {
        let second = Int64(now().timeIntervalSince1970)
        return state.withLock { state in
            guard let last = state.lastFloodSecond else { return false }
            return second - last < Self.floodMemorySeconds
        }
    }

    static let floodMemorySeconds: Int64 = 30
    private var floodThreshold: Int { max(1, options.perMinute / 60) }

    /// Writes what is queued every `flushInterval`, until `close()`; then
    /// writes what is left and returns.
    public func run() async {
        while true {
            let closed = state.withLock { $0.closed }
            await flush()
            if closed { return }
            try? await Task.sleep(for: options.flushInterval)
        }
    }

    /// Stop queueing; `run()` writes what is queued and returns.
    public func close() {
        state.withLock { $0.closed = true }
    }

    /// Writes everything queued (and the summaries of past minutes). On a
    /// database error the rows stay queued for the next round; what cannot
    /// wait, past `perMinute` rows, is counted in the next summary instead.
    public func flush() async {
        let minute = Int64(now().timeIntervalSince1970 / 60)
        var rows = state.withLock { state -> [Row] in
            rollOver(&state, to: minute)
            defer { state.queue = [] }
            return state.queue
        }
        while !rows.isEmpty {
            let batch = Array(rows.prefix(options.maxBatch))
            do {
                try await insert(batch)
                rows.removeFirst(batch.count)
            } catch {
                logger.warning("Could not record refused deliveries; keeping them for the next round",
                               metadata: ["rows": "\(rows.count)", "error": "\(safeDescription(error))"])
                requeue(rows)
                return
            }
        }
    }

    /// Puts unwritten rows back in front of the queue, within the bound of
    /// one minute's worth; the rest become one summary row.
    private func requeue(_ rows: [Row]) {
        state.withLock { state in
            var all = rows + state.queue
            if all.count > options.perMinute {
                let dropped = all.count - options.perMinute
                var counts: [String: Int64] = [:]
                for row in all.prefix(dropped) where row.reason != Self.summaryReason { counts[row.reason, default: 0] += row.occurrences }
                all.removeFirst(dropped)
                countUnrecorded(Int(counts.values.reduce(0, +)))
                if !counts.isEmpty { all.append(summary(counts, at: now())) }
            }
            state.queue = all
        }
    }

    static let summaryReason = "over_rate_limit"

    /// A new minute: the one before gets its summary row, if anything was only counted.
    private func rollOver(_ state: inout State, to minute: Int64) {
        guard minute != state.minute else { return }
        if !state.overflow.isEmpty {
            state.queue.append(summary(state.overflow, at: Date(timeIntervalSince1970: Double(state.minute + 1) * 60)))
        }
        state.minute = minute
        state.queuedThisMinute = 0
        state.overflow = [:]
    }

    private func summary(_ counts: [String: Int64], at: Date) -> Row {
        let detail = counts.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return Row(at: at, reason: Self.summaryReason,
                   detail: Self.printable("not stored one by one: \(detail)", limit: 200),
                   bodySHA256: nil, bodyBytes: 0, occurrences: counts.values.reduce(0, +))
    }

    private func insert(_ rows: [Row]) async throws {
        let logger = logger
        _ = try await client.withGuardedConnection { connection in
            try await connection.query("""
                INSERT INTO siwa.rejected_notifications (received_at, reason, detail, body_sha256, body_bytes, occurrences)
                SELECT at, reason, nullif(detail, ''), nullif(sha, ''), bytes, occurrences
                FROM unnest(\(rows.map(\.at))::timestamptz[], \(rows.map(\.reason))::text[], \(rows.map { $0.detail ?? "" })::text[],
                            \(rows.map { $0.bodySHA256 ?? "" })::text[], \(rows.map(\.bodyBytes))::int8[],
                            \(rows.map(\.occurrences))::int8[]) AS r(at, reason, detail, sha, bytes, occurrences)
                """, logger: logger)
        }
    }

    /// Printable ASCII only (no NUL, no control character, no byte of
    /// invalid UTF-8 reaches the database), at most `limit` bytes.
    static func printable(_ text: String, limit: Int) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(min(limit, text.utf8.count))
        for byte in text.utf8 {
            guard bytes.count < limit else { break }
            bytes.append((0x20...0x7E).contains(byte) ? byte : UInt8(ascii: "?"))
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
