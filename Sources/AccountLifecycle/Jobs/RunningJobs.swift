import AccountStore
import Synchronization

/// Jobs running in this process, by lease (one per claim: a job claimed
/// again after its lease was lost is a new run), so the heartbeat can list
/// them and shutdown (or a lost lease) can cancel them.
final class RunningJobs: Sendable {
    typealias Run = (id: Int64, lease: String)
    private let tasks = Mutex([String: (id: Int64, started: ContinuousClock.Instant, task: Task<Void, Never>)]())

    var count: Int { tasks.withLock { $0.count } }

    /// The runs that started after `instant`.
    func runs(startedAfter instant: ContinuousClock.Instant) -> [Run] {
        tasks.withLock { $0.filter { $0.value.started > instant }.map { ($0.value.id, $0.key) } }
    }

    /// Registers the task under the lock, so it cannot finish before it is known.
    func start(_ job: ClaimedJob, _ makeTask: () -> Task<Void, Never>) {
        let now = ContinuousClock.now
        tasks.withLock { $0[job.lease] = (job.id, now, makeTask()) }
    }

    func finished(_ lease: String) {
        _ = tasks.withLock { $0.removeValue(forKey: lease) }
    }

    /// Cancels the run's task; nil if it had already finished.
    @discardableResult
    func cancel(_ lease: String) -> Task<Void, Never>? {
        guard let entry = tasks.withLock({ $0.removeValue(forKey: lease) }) else { return nil }
        entry.task.cancel()
        return entry.task
    }

    func cancelAll() -> [(Run, Task<Void, Never>)] {
        let all = tasks.withLock { tasks in
            defer { tasks.removeAll() }
            return tasks
        }
        for entry in all.values { entry.task.cancel() }
        return all.map { (($0.value.id, $0.key), $0.value.task) }
    }
}
