import ServiceLifecycle
import Synchronization

/// Opened once the public listener's start-up found the schema up to date
/// (it may wait for `siwa migrate`): the admin and API listeners, services
/// that start beside it, bind only then, so that no request is served
/// against a schema this binary does not know.
final class SchemaGate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// Open: the schema is current (serve's metrics listener's `/readyz`).
    var isOpen: Bool { state.withLock { $0.open } }

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once open; throws `CancellationError` when the process stops
    /// first (its listener then never binds).
    func wait() async throws {
        await withTaskCancellationOrGracefulShutdownHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.open { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancelOrGracefulShutdown: {
            self.open()
        }
        if Task.isCancelled || Task.isShuttingDownGracefully { throw CancellationError() }
    }
}
