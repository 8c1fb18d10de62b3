import Synchronization

/// The worker's `concurrency`: how many jobs run one by one at once. A
/// claimed job whose kind's batch step left it to run waits here for a
/// slot (first come, first served), holding its lease meanwhile (the lease
/// keeper renews it; shutdown releases it).
final class JobSlots: Sendable {
    private struct State {
        var free: Int
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextID: UInt64 = 0
    }
    private let state: Mutex<State>

    init(_ count: Int) {
        state = Mutex(State(free: max(1, count)))
    }

    /// Slots no run holds, less the runs already waiting for one (never below 0).
    var unclaimed: Int { state.withLock { max(0, $0.free - $0.waiters.count) } }

    /// Waits for a slot. False when the task was cancelled first (no slot taken).
    func acquire() async -> Bool {
        let id = state.withLock { state -> UInt64 in
            defer { state.nextID &+= 1 }
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now = state.withLock { state -> Bool? in
                    if Task.isCancelled { return false }
                    if state.free > 0 && state.waiters.isEmpty {
                        state.free -= 1
                        return true
                    }
                    state.waiters.append((id, continuation))
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(returning: false)
        }
    }

    /// Gives a slot back: to the first run waiting, if any.
    func release() {
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard !state.waiters.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        waiter?.resume(returning: true)
    }
}
