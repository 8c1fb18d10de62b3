import Synchronization

/// A result delivered once to one waiter; later deliveries are ignored. Lets
/// a request stop waiting (timeout, cancellation) while the writer that holds
/// the other end still finishes its work.
public final class OneShot<Value: Sendable>: Sendable {
    private struct State {
        var waiter: CheckedContinuation<Value, any Error>?
        var result: Result<Value, any Error>?
    }

    private let state = Mutex(State())

    public init() {}

    public func wait() async throws -> Value {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let ready = state.withLock { state -> Result<Value, any Error>? in
                    if let result = state.result { return result }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            complete(.failure(CancellationError()))
        }
    }

    public func complete(_ result: Result<Value, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Value, any Error>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: result)
    }
}
