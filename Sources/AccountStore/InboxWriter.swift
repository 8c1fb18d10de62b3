import Foundation
import Logging
import PostgresNIO
import Synchronization

/// Records verified notifications with group commit.
///
/// A durable commit costs a disk flush; one notification per transaction tops
/// out at a few thousand per second. Here callers queue their entries and a
/// few writer tasks each take everything that is waiting in their queue (up
/// to `maxBatch`) into one transaction. No artificial delay: an idle writer
/// takes a lone entry at once, and entries pile up only while the writers are
/// busy committing, which is exactly when batching pays. Each caller is
/// answered after its own batch commits. If a batch fails (a lost
/// connection, a lock timeout), its entries are retried one transaction
/// each, so one bad entry never fails the others.
///
/// Each Apple user (`sub`) has one writer: every row a notification locks
/// (its user, its pending purge job, its `jti`, which Apple never reuses for
/// another sub) belongs to that sub, so two writers never wait for each
/// other and cannot deadlock, whatever Apple redelivers when.
public final class InboxWriter: Sendable {
    public struct Options: Sendable {
        public var writers: Int = 4
        public var maxBatch: Int = 64
        /// How long a caller waits for its commit before giving up (the HTTP
        /// layer answers 503 and Apple retries; a late commit is harmless,
        /// the retry is then a duplicate).
        public var timeout: Duration = .seconds(10)
        public init() {}
    }

    struct Pending: Sendable {
        let entry: InboxEntry
        let result: OneShot<InboxOutcome>
        let enqueued: ContinuousClock.Instant
    }

    private struct State {
        /// One queue and one idle slot per writer.
        var queues: [[Pending]]
        var idle: [CheckedContinuation<[Pending]?, Never>?]
        var closed = false
    }

    private let client: PostgresClient
    private let options: Options
    private let logger: Logger
    private let state: Mutex<State>
    /// Callers still waiting, so the sweeper can answer those past their
    /// deadline (one timer for all, rather than one task per request).
    private let waiting = Mutex([ObjectIdentifier: Pending]())
    private let failedBatches = Atomic<Int>(0)

    /// Batches whose transaction failed and were retried entry by entry
    /// (a lost connection, a lock timeout), since start.
    public var failedBatchCount: Int { failedBatches.load(ordering: .relaxed) }

    public init(client: PostgresClient, options: Options = .init(), logger: Logger) {
        self.client = client
        self.options = options
        self.logger = logger
        let writers = max(1, options.writers)
        state = Mutex(State(queues: Array(repeating: [], count: writers), idle: Array(repeating: nil, count: writers)))
    }

    /// The writer of a sub (see the type's comment).
    private func writer(for sub: String, of count: Int) -> Int {
        var hasher = Hasher()
        hasher.combine(sub)
        return Int(UInt(bitPattern: hasher.finalize()) % UInt(count))
    }

    /// Record one entry; returns once its transaction has committed.
    /// Throws `InboxUnavailable` when the database cannot be reached in time.
    public func record(_ entry: InboxEntry) async throws -> InboxOutcome {
        let pending = Pending(entry: entry, result: OneShot(), enqueued: .now)
        let handOff = state.withLock { state -> (CheckedContinuation<[Pending]?, Never>?, Bool) in
            if state.closed { return (nil, false) }
            let index = writer(for: entry.appleSub, of: state.queues.count)
            if let idle = state.idle[index] {
                state.idle[index] = nil
                return (idle, true)
            }
            state.queues[index].append(pending)
            return (nil, true)
        }
        guard handOff.1 else { throw InboxUnavailable(reason: "shutting down") }
        handOff.0?.resume(returning: [pending])

        let key = ObjectIdentifier(pending.result)
        waiting.withLock { $0[key] = pending }
        defer { _ = waiting.withLock { $0.removeValue(forKey: key) } }
        return try await pending.result.wait()
    }

    /// Run the writers until `close()` is called and the queue is drained.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.answerOverdueCallers() }
            await withDiscardingTaskGroup { writers in
                for index in 0..<max(1, options.writers) {
                    writers.addTask {
                        while let batch = await self.nextBatch(for: index) { await self.commit(batch) }
                    }
                }
            }
            group.cancelAll()
        }
    }

    /// Answers callers whose commit did not come within the timeout (the
    /// database hangs or is down); ten checks per timeout period.
    private func answerOverdueCallers() async {
        let timeout = options.timeout
        while !Task.isCancelled {
            try? await Task.sleep(for: timeout / 10)
            let now = ContinuousClock.now
            let overdue = waiting.withLock { $0.values.filter { now - $0.enqueued >= timeout } }
            for pending in overdue {
                pending.result.complete(.failure(InboxUnavailable(reason: "no commit within \(timeout)")))
            }
        }
    }

    /// Stop accepting entries; writers finish what is queued, then `run()` returns.
    public func close() {
        let idle = state.withLock { state -> [CheckedContinuation<[Pending]?, Never>] in
            state.closed = true
            defer { state.idle = state.idle.map { _ in nil } }
            return state.idle.compactMap { $0 }
        }
        for writer in idle { writer.resume(returning: nil) }
    }

    private func nextBatch(for index: Int) async -> [Pending]? {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [Pending]?? in
                if !state.queues[index].isEmpty {
                    let batch = Array(state.queues[index].prefix(options.maxBatch))
                    state.queues[index].removeFirst(batch.count)
                    return .some(batch)
                }
                if state.closed { return .some(nil) }
                state.idle[index] = continuation
                return .none
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private func commit(_ batch: [Pending]) async {
        // Skip entries whose caller already gave up: their sender retries.
        let now = ContinuousClock.now
        let live = batch.filter { now - $0.enqueued < options.timeout }
        for pending in batch where now - pending.enqueued >= options.timeout {
            pending.result.complete(.failure(InboxUnavailable(reason: "queued too long")))
        }
        guard !live.isEmpty else { return }
        let logger = logger
        do {
            let outcomes = try await client.withGuardedTransaction(logger: logger) { connection in
                try await Self.record(live.map(\.entry), on: connection, logger: logger)
            }
            for (pending, outcome) in zip(live, outcomes) { pending.result.complete(.success(outcome)) }
        } catch {
            failedBatches.add(1, ordering: .relaxed)
            logger.warning("Batch commit failed; retrying its entries one by one",
                           metadata: ["batch": "\(live.count)", "error": "\(safeDescription(error))"])
            for pending in live {
                // Past its deadline the caller has its 503 already; Apple retries it.
                guard ContinuousClock.now - pending.enqueued < options.timeout else {
                    pending.result.complete(.failure(InboxUnavailable(reason: "queued too long")))
                    continue
                }
                do {
                    let outcomes = try await client.withGuardedTransaction(logger: logger) { connection in
                        try await Self.record([pending.entry], on: connection, logger: logger)
                    }
                    pending.result.complete(.success(outcomes[0]))
                } catch {
                    pending.result.complete(.failure(InboxUnavailable(reason: "database error")))
                }
            }
        }
    }

    /// Records `entries` in one transaction (the caller's), one statement
    /// per round; returns their outcomes in order.
    public static func record(_ entries: [InboxEntry], on connection: PostgresConnection, logger: Logger) async throws -> [InboxOutcome] {
        var outcomes = [InboxOutcome](repeating: .duplicate, count: entries.count)
        for round in RecordNotificationStatement.rounds(of: entries) {
            let statement = RecordNotificationStatement(entries: round.map { entries[$0] })
            var answered = 0
            for try await row in try await connection.execute(statement, logger: logger) {
                outcomes[round[Int(row.0) - 1]] = RecordNotificationStatement.outcome(of: row)
                answered += 1
            }
            guard answered == round.count else { throw InboxStatementMismatch(expected: round.count, got: answered) }
        }
        return outcomes
    }
}

/// The batch statement answered a different number of rows than it was
/// given: a bug, never a reason to acknowledge a notification.
struct InboxStatementMismatch: Error {
    let expected: Int
    let got: Int
}
/// The inbox could not record the entry now; the sender should retry.
public struct InboxUnavailable: Error, Sendable, CustomStringConvertible {
    public let reason: String
    public var description: String { "the notification inbox is unavailable: \(reason)" }
}
