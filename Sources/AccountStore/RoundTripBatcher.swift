import Foundation
import Logging
import Synchronization

/// Makes many callers' database calls of one kind as one round trip.
///
/// A round trip costs siwa far more CPU than the statement's own work
/// (leasing a connection, the guard's task, a write and a read on the
/// socket, waking the caller): about 100 µs on our machines, measured by
/// adding one to a sign-in. Here callers queue their inputs and a few lanes
/// each take everything waiting in their queue (up to `maxBatch`) into one
/// call of `run`. No artificial delay: an idle lane takes a lone input at
/// once, and inputs pile up only while the lanes are busy, which is exactly
/// when batching pays. Each caller is answered after its own batch.
///
/// If a batch fails and `retryAlone` says its inputs may run again (the
/// batch rolled back: a lock timeout, a deadlock, one bad input), each runs
/// alone, so one bad input never fails the others; otherwise every caller
/// gets the batch's error.
///
/// Inputs with the same `laneKey` share a lane, so two batches running at
/// once never hold the same key's rows (the inbox's and sign-in's key is
/// the Apple user).
public final class RoundTripBatcher<Input: Sendable, Output: Sendable>: Sendable {
    public typealias Options = RoundTripBatching

    public typealias Run = @Sendable ([Input]) async throws -> [Output]

    struct Pending: Sendable {
        let input: Input
        let result: OneShot<Output>
        let enqueued: ContinuousClock.Instant
        /// Set once the input's batch is sent: past that, a caller who stops
        /// waiting does not know whether it ran.
        let sent = Flag()
    }

    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .releasing) }
        var isSet: Bool { value.load(ordering: .acquiring) }
    }

    private struct State {
        /// One queue and one idle slot per lane.
        var queues: [[Pending]]
        var idle: [CheckedContinuation<[Pending]?, Never>?]
        var closed = false
    }

    private let options: Options
    private let laneKey: @Sendable (Input) -> String
    private let run: Run
    private let retryAlone: @Sendable (any Error) -> Bool
    private let logger: Logger
    private let state: Mutex<State>
    /// Callers still waiting, so the sweeper can answer those past their
    /// deadline (one timer for all, rather than one task per call).
    private let waiting = Mutex([ObjectIdentifier: Pending]())
    private let failedBatches = Atomic<Int>(0)

    /// Batches that failed and were retried input by input, since start.
    public var failedBatchCount: Int { failedBatches.load(ordering: .relaxed) }

    /// - Parameters:
    ///   - run: makes one round trip for a batch; answers one output per
    ///     input, in order.
    ///   - retryAlone: whether a failed batch's inputs may each run again
    ///     (the batch surely had no effect).
    public init(options: Options = .init(), logger: Logger, laneKey: @escaping @Sendable (Input) -> String,
                retryAlone: @escaping @Sendable (any Error) -> Bool = { _ in true }, run: @escaping Run) {
        self.options = options
        self.logger = logger
        self.laneKey = laneKey
        self.retryAlone = retryAlone
        self.run = run
        let lanes = max(1, options.lanes)
        state = Mutex(State(queues: Array(repeating: [], count: lanes), idle: Array(repeating: nil, count: lanes)))
    }

    private func lane(for input: Input, of count: Int) -> Int {
        var hasher = Hasher()
        hasher.combine(laneKey(input))
        return Int(UInt(bitPattern: hasher.finalize()) % UInt(count))
    }

    /// Makes the call for one input; returns once its batch has answered.
    /// Throws `RoundTripUnavailable` after `close()`, `RoundTripTimedOut`
    /// past the timeout, or the batch's (or the lone retry's) error.
    public func call(_ input: Input) async throws -> Output {
        let pending = Pending(input: input, result: OneShot(), enqueued: .now)
        let handOff = state.withLock { state -> (CheckedContinuation<[Pending]?, Never>?, Bool) in
            if state.closed { return (nil, false) }
            let index = lane(for: input, of: state.queues.count)
            if let idle = state.idle[index] {
                state.idle[index] = nil
                return (idle, true)
            }
            state.queues[index].append(pending)
            return (nil, true)
        }
        guard handOff.1 else { throw RoundTripUnavailable() }
        handOff.0?.resume(returning: [pending])

        let key = ObjectIdentifier(pending.result)
        waiting.withLock { $0[key] = pending }
        defer { _ = waiting.withLock { $0.removeValue(forKey: key) } }
        return try await pending.result.wait()
    }

    /// Runs the lanes until `close()` is called and the queues are drained.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.answerOverdueCallers() }
            await withDiscardingTaskGroup { lanes in
                for index in 0..<max(1, options.lanes) {
                    lanes.addTask {
                        while let batch = await self.nextBatch(for: index) { await self.send(batch) }
                    }
                }
            }
            group.cancelAll()
        }
    }

    /// Stop accepting inputs; lanes finish what is queued, then `run()` returns.
    public func close() {
        let idle = state.withLock { state -> [CheckedContinuation<[Pending]?, Never>] in
            state.closed = true
            defer { state.idle = state.idle.map { _ in nil } }
            return state.idle.compactMap { $0 }
        }
        for lane in idle { lane.resume(returning: nil) }
    }

    /// Answers callers whose batch did not answer within the timeout (the
    /// database hangs or is down); ten checks per timeout period.
    private func answerOverdueCallers() async {
        let timeout = options.timeout
        while !Task.isCancelled {
            try? await Task.sleep(for: timeout / 10)
            let now = ContinuousClock.now
            let overdue = waiting.withLock { $0.values.filter { now - $0.enqueued >= timeout } }
            for pending in overdue {
                pending.result.complete(.failure(RoundTripTimedOut(sent: pending.sent.isSet, timeout: timeout)))
            }
        }
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

    private func send(_ batch: [Pending]) async {
        // Skip inputs whose caller already gave up (nothing was done for them).
        let live = batch.filter { !isOverdue($0) }
        for pending in batch where isOverdue(pending) {
            pending.result.complete(.failure(RoundTripTimedOut(sent: false, timeout: options.timeout)))
        }
        guard !live.isEmpty else { return }
        for pending in live { pending.sent.set() }
        do {
            let outputs = try await run(live.map(\.input))
            guard outputs.count == live.count else { throw RoundTripMismatch(expected: live.count, got: outputs.count) }
            for (pending, output) in zip(live, outputs) { pending.result.complete(.success(output)) }
        } catch {
            failedBatches.add(1, ordering: .relaxed)
            guard retryAlone(error) else {
                for pending in live { pending.result.complete(.failure(error)) }
                return
            }
            logger.warning("Batch failed; retrying its inputs one by one",
                           metadata: ["batch": "\(live.count)", "error": "\(safeDescription(error))"])
            for pending in live {
                // Past its deadline the caller has its answer already (the
                // batch rolled back, so nothing was done for it).
                guard !isOverdue(pending) else {
                    pending.result.complete(.failure(RoundTripTimedOut(sent: false, timeout: options.timeout)))
                    continue
                }
                do {
                    let outputs = try await run([pending.input])
                    guard outputs.count == 1 else { throw RoundTripMismatch(expected: 1, got: outputs.count) }
                    pending.result.complete(.success(outputs[0]))
                } catch {
                    pending.result.complete(.failure(error))
                }
            }
        }
    }

    private func isOverdue(_ pending: Pending) -> Bool {
        ContinuousClock.now - pending.enqueued >= options.timeout
    }
}

/// How a `RoundTripBatcher` batches.
public struct RoundTripBatching: Sendable {
    public var lanes: Int = 4
    public var maxBatch: Int = 64
    /// How long a caller waits for its answer before giving up (with
    /// `RoundTripTimedOut`; a batch already sent may still commit).
    public var timeout: Duration = .seconds(10)
    public init() {}
}

/// The batcher is closed (siwa is shutting down).
public struct RoundTripUnavailable: Error, Sendable, CustomStringConvertible {
    public var description: String { "shutting down" }
}

/// No answer within the batcher's timeout. When `sent` is true the call
/// may still have taken effect.
public struct RoundTripTimedOut: Error, Sendable, CustomStringConvertible {
    public let sent: Bool
    public let timeout: Duration
    public var description: String { sent ? "no answer within \(timeout)" : "queued longer than \(timeout)" }
}

/// A batch answered a different number of outputs than it was given: a
/// bug, never a reason to answer a caller.
struct RoundTripMismatch: Error {
    let expected: Int
    let got: Int
}
