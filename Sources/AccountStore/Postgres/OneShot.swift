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
        _ = completeIfFirst(result)
    }

    /// `complete`, and whether this was the first delivery (false: ignored).
    public func completeIfFirst(_ result: Result<Value, any Error>) -> Bool {
        let (first, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Value, any Error>?) in
            guard state.result == nil else { return (false, nil) }
            state.result = result
            defer { state.waiter = nil }
            return (true, state.waiter)
        }
        waiter?.resume(with: result)
        return first
    }
}

/// Runs `work`, but stops waiting for it after `limit`: returns its value, or
/// nil if it failed or took too long. The work is cancelled when the limit
/// passes or the caller is cancelled (a late result is dropped).
public func withDeadline<T: Sendable>(_ limit: Duration, _ work: @escaping @Sendable () async throws -> T) async -> T? {
    let result = OneShot<T?>()
    let worker = Task {
        do { result.complete(.success(try await work())) } catch { result.complete(.success(nil)) }
    }
    let timer = Task {
        try await Task.sleep(for: limit)
        result.complete(.success(nil))
        worker.cancel()
    }
    defer {
        timer.cancel()
        worker.cancel()  // a no-op when it finished; stops it when the caller gave up
    }
    return (try? await result.wait()) ?? nil
}

/// `work` did not finish within its time limit, and was cancelled.
public struct TimeLimitExceeded: Error, Sendable, CustomStringConvertible {
    public let seconds: Double
    public init(seconds: Double) { self.seconds = seconds }
    public var description: String { "did not finish within \(seconds.formattedSeconds) s" }
}

/// Runs `work` under a time limit: its value or its error, or
/// `TimeLimitExceeded` once `seconds` have passed. The work is cancelled
/// then and no longer waited for, so a call that ignores cancellation
/// cannot hold the caller past the limit. Cancelling the caller cancels the
/// work too (and throws `CancellationError`).
public func withTimeLimit<T: Sendable>(seconds: Double, _ work: @escaping @Sendable () async throws -> T) async throws -> T {
    let result = OneShot<T>()
    let worker = Task {
        do { result.complete(.success(try await work())) } catch { result.complete(.failure(error)) }
    }
    let timer = Task {
        try await Task.sleep(for: .seconds(seconds))
        result.complete(.failure(TimeLimitExceeded(seconds: seconds)))
        worker.cancel()
    }
    defer {
        timer.cancel()
        worker.cancel()  // a no-op when it finished; stops it when the caller gave up
    }
    return try await result.wait()
}

extension Double {
    /// "2", "0.5", "1.25": seconds as people write them in settings.
    public var formattedSeconds: String {
        self == rounded() && abs(self) < 1e15 ? String(Int64(self)) : String(self)
    }
}
