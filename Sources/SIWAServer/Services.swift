import AccountStore
import AppleSignIn
import ServiceLifecycle

/// Runs the group-commit writers; on shutdown they finish what is queued.
public struct InboxWriterService: Service {
    let writer: InboxWriter
    public init(writer: InboxWriter) { self.writer = writer }

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

/// Writes refused deliveries in batches; on shutdown writes what is queued.
public struct RejectionWriterService: Service {
    let writer: RejectionWriter
    public init(writer: RejectionWriter) { self.writer = writer }

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
