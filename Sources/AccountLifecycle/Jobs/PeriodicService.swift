import ServiceLifecycle

/// A duty done every `interval` until graceful shutdown: the lease keeper,
/// the rescuer, the cleaner (River's maintenance services: a run-once step
/// and a loop around it, started and stopped by their owner).
protocol PeriodicService: Service {
    var interval: Duration { get }
    /// The first pass waits an interval (the heartbeat: nothing to renew at start).
    var waitsFirst: Bool { get }
    /// One pass; it reports its own errors (a pass that failed is tried again next time).
    func runOnce() async
}

extension PeriodicService {
    var waitsFirst: Bool { false }

    func run() async {
        await cancelWhenGracefulShutdown {
            if waitsFirst { try? await Task.sleep(for: interval) }
            while !Task.isCancelled {
                await runOnce()
                try? await Task.sleep(for: interval)
            }
        }
    }
}
