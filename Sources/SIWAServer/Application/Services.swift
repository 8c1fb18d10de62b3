import AccountStore
import AppleSignIn
import ServiceLifecycle

/// A writer that runs until closed and then finishes what is queued: the
/// group-commit inbox, the rejection writer and sign-in's store.
public protocol DrainingWriter: Sendable {
    func run() async
    func close()
}

extension InboxWriter: DrainingWriter {}
extension RejectionWriter: DrainingWriter {}
extension SignInStore: DrainingWriter {}

/// Runs a writer; on shutdown (or cancellation) it stops taking work and
/// writes what is queued.
public struct WriterService<Writer: DrainingWriter>: Service {
    let writer: Writer
    public init(writer: Writer) { self.writer = writer }

    public func run() async throws {
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await writer.run()
            } onGracefulShutdown: {
                writer.close()
            }
        } onCancel: {
            writer.close()
        }
    }
}

/// Keeps Apple's keys fresh: loads at start (retrying while Apple is
/// unreachable), then refreshes on an interval.
public struct KeyRefreshService: Service {
    let keys: AppleKeySet
    let interval: Duration
    public init(keys: AppleKeySet, interval: Duration) {
        self.keys = keys
        self.interval = interval
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await keys.refreshPeriodically(every: interval)
        }
    }
}
