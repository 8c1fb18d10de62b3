import Foundation
import Logging
import Synchronization

/// Makes many callers' database calls of one kind as one round trip.
///
/// A round trip costs siwa far more CPU than the statement's own work
/// (leasing a connection, the guard's task, a write and a read on the
/// socket, waking the caller): over 100 µs on our machines, measured by
/// adding one to a sign-in. Here callers queue their inputs and a few lanes
/// each take everything waiting in their queue (up to `maxBatch`) into one
/// call of `run`. No artificial delay: an idle lane takes a lone input at
/// once, and inputs pile up only while the lanes are busy, which is exactly
/// when batching pays. Each caller is answered after its own batch.
///
/// If a batch fails and `retryAlone` says its inputs may run again (the
/// batch rolled back: a lock timeout, a deadlock, one bad input), each runs
/// alone, so one bad input never fails the others; otherwise every caller
/// gets the batch's error. An input once sent is always run to the end,
/// even after its caller stopped waiting (and was told it may have taken
/// effect): so "may have taken effect" comes true, and a retry by the
/// caller finds it done.
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
        let progress = RoundTripProgress()
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
    private let sentBatches = Atomic<Int>(0)
    private let sentInputs = Atomic<Int>(0)

    /// Batches that failed, since start.
    public var failedBatchCount: Int { failedBatches.load(ordering: .relaxed) }
    /// Calls waiting in the lanes' queues for a batch to take them (not
    /// those in a batch already).
    public var queuedCount: Int { state.withLock { $0.queues.reduce(0) { $0 + $1.count } } }
    /// Batches sent and the inputs in them, since start (lone retries not counted).
    public var sentCounts: (batches: Int, inputs: Int) {
        (sentBatches.load(ordering: .relaxed), sentInputs.load(ordering: .relaxed))
    }

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
    /// Throws `RoundTripUnavailable` (not sent) after `close()` or when the
    /// lane's queue is full, `RoundTripTimedOut` past the timeout, or the
    /// batch's (or the lone retry's) error.
    public func call(_ input: Input) async throws -> Output {
        let pending = Pending(input: input, result: OneShot(), enqueued: .now)
        let handOff = state.withLock { state -> Result<CheckedContinuation<[Pending]?, Never>?, RoundTripUnavailable> in
            if state.closed { return .failure(RoundTripUnavailable(reason: "shutting down")) }
            let index = lane(for: input, of: state.queues.count)
            if let idle = state.idle[index] {
                state.idle[index] = nil
                return .success(idle)
            }
            guard state.queues[index].count < options.maxQueued else {
                return .failure(RoundTripUnavailable(reason: "\(options.maxQueued) calls queued already"))
            }
            state.queues[index].append(pending)
            return .success(nil)
        }
        try handOff.get()?.resume(returning: [pending])

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
            var abandoned = false
            for pending in overdue {
                let notSent = pending.progress.abandon()
                abandoned = abandoned || notSent
                pending.result.complete(.failure(RoundTripTimedOut(sent: !notSent, timeout: timeout)))
            }
            // A stuck lane's queue holds only live calls.
            if abandoned {
                state.withLock { state in
                    for lane in state.queues.indices { state.queues[lane].removeAll { $0.progress.isAbandoned } }
                }
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
        // Past their deadline, callers not yet answered are told their call
        // was not sent, and it is not.
        for pending in batch where ContinuousClock.now - pending.enqueued >= options.timeout && pending.progress.abandon() {
            pending.result.complete(.failure(RoundTripTimedOut(sent: false, timeout: options.timeout)))
        }
        let live = batch.filter { $0.progress.send() }
        guard !live.isEmpty else { return }
        sentBatches.add(1, ordering: .relaxed)
        sentInputs.add(live.count, ordering: .relaxed)
        do {
            for (pending, output) in zip(live, try await runChecked(live.map(\.input))) { pending.result.complete(.success(output)) }
        } catch {
            failedBatches.add(1, ordering: .relaxed)
            guard retryAlone(error) else {
                for pending in live { pending.result.complete(.failure(error)) }
                return
            }
            logger.warning("Batch failed; retrying its inputs one by one",
                           metadata: ["batch": "\(live.count)", "error": "\(safeDescription(error))"])
            await runEachAlone(live)
        }
    }

    /// `run`, and one output per input.
    private func runChecked(_ inputs: [Input]) async throws -> [Output] {
        let outputs = try await run(inputs)
        guard outputs.count == inputs.count else { throw RoundTripMismatch(expected: inputs.count, got: outputs.count) }
        return outputs
    }

    /// Runs each input of a failed batch alone, every one (a caller told it
    /// may have taken effect must find it done): one key's inputs in order,
    /// different keys at once, so one stuck on a lock does not hold up the
    /// others past their deadline.
    private func runEachAlone(_ live: [Pending]) async {
        await withDiscardingTaskGroup { group in
            for inputs in Dictionary(grouping: live, by: { laneKey($0.input) }).values {
                group.addTask {
                    for pending in inputs {
                        do {
                            pending.result.complete(.success(try await self.runChecked([pending.input])[0]))
                        } catch {
                            pending.result.complete(.failure(error))
                        }
                    }
                }
            }
        }
    }
}

/// Where an input is: queued, then either sent (by a lane) or abandoned
/// (by the sweeper, its caller past the timeout), never both: each move
/// is a compare-and-exchange from `queued`, so a caller told "not sent"
/// is never sent.
final class RoundTripProgress: Sendable {
    private static let (queued, sent, abandoned) = (UInt8(0), UInt8(1), UInt8(2))
    private let value = Atomic<UInt8>(RoundTripProgress.queued)

    /// Whether this call sent it (false: it was abandoned).
    func send() -> Bool {
        value.compareExchange(expected: Self.queued, desired: Self.sent, ordering: .acquiringAndReleasing).exchanged
    }

    /// Whether this call abandoned it (false: it was sent).
    func abandon() -> Bool {
        value.compareExchange(expected: Self.queued, desired: Self.abandoned, ordering: .acquiringAndReleasing).exchanged
    }

    var isAbandoned: Bool { value.load(ordering: .acquiring) == Self.abandoned }
}

/// How a `RoundTripBatcher` batches.
public struct RoundTripBatching: Sendable {
    public var lanes: Int = 4
    public var maxBatch: Int = 64
    /// How long a caller waits for its answer before giving up (with
    /// `RoundTripTimedOut`; a batch already sent may still commit).
    public var timeout: Duration = .seconds(10)
    /// Calls waiting in one lane at most; more are refused at once
    /// (`RoundTripUnavailable`), not queued behind a lane that is stuck.
    public var maxQueued: Int = 4096
    public init() {}
}

/// The call was not sent: the batcher is closed (siwa is shutting down) or
/// its lane's queue is full.
public struct RoundTripUnavailable: Error, Sendable, CustomStringConvertible {
    public let reason: String
    public var description: String { reason }
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
