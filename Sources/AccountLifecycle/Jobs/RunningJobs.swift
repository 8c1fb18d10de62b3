import AccountStore
import Synchronization

/// Jobs this process holds, by lease (one per claim: a job claimed again
/// after its lease was lost is a new run), so the heartbeat can list them
/// and shutdown (or a lost lease) can stop them. A job is held from its
/// claim: first by its claim's batch step (one task for the whole claim),
/// then by its own run (waiting for a slot, then running).
final class RunningJobs: Sendable {
    typealias Run = (id: Int64, lease: String)

    private struct Entry {
        let id: Int64
        let started: ContinuousClock.Instant
        let task: Task<Void, Never>
        /// Held by its claim's batch step, whose task others share.
        let inBatch: Bool
    }

    private struct State {
        var entries: [String: Entry] = [:]
        /// Shutdown has taken every entry: no run starts any more.
        var closed = false
    }
    private let state = Mutex(State())

    var count: Int { state.withLock { $0.entries.count } }

    /// The runs that started after `instant`.
    func runs(startedAfter instant: ContinuousClock.Instant) -> [Run] {
        state.withLock { $0.entries.filter { $0.value.started > instant }.map { ($0.value.id, $0.key) } }
    }

    /// Registers a claim's jobs, held by its batch step's task (made under
    /// the lock, so it cannot hand a job on before the job is known).
    func holdInBatch(_ jobs: [ClaimedJob], _ makeTask: () -> Task<Void, Never>) {
        let now = ContinuousClock.now
        state.withLock { state in
            let task = makeTask()
            for job in jobs { state.entries[job.lease] = Entry(id: job.id, started: now, task: task, inBatch: true) }
        }
    }

    /// The batch step is done with `job`, which runs on a task of its own
    /// now. False (and no task made) when it is no longer held here: its
    /// lease was lost meanwhile, or shutdown took it.
    func start(_ job: ClaimedJob, _ makeTask: () -> Task<Void, Never>) -> Bool {
        state.withLock { state in
            guard !state.closed, let held = state.entries[job.lease], held.inBatch else { return false }
            state.entries[job.lease] = Entry(id: job.id, started: held.started, task: makeTask(), inBatch: false)
            return true
        }
    }

    /// The run has its slot and starts now: its time limit (the heartbeat
    /// renews a run's lease for SIWA_JOB_MAX_RUN_SECONDS) counts from here,
    /// not from the claim.
    func running(_ lease: String) {
        let now = ContinuousClock.now
        state.withLock { state in
            guard let held = state.entries[lease] else { return }
            state.entries[lease] = Entry(id: held.id, started: now, task: held.task, inBatch: held.inBatch)
        }
    }

    func finished(_ lease: String) {
        _ = state.withLock { $0.entries.removeValue(forKey: lease) }
    }

    /// Stops the run: its own task is cancelled; a job still in its batch
    /// step is only let go (the step's other jobs carry on, and the step's
    /// writes for this one are guarded by the lost lease). Nil if it had
    /// already finished.
    @discardableResult
    func cancel(_ lease: String) -> Task<Void, Never>? {
        guard let entry = state.withLock({ $0.entries.removeValue(forKey: lease) }) else { return nil }
        if !entry.inBatch { entry.task.cancel() }
        return entry.task
    }

    /// Shutdown: every held job with the task holding it, each task
    /// cancelled; no run starts after this.
    func cancelAll() -> [(Run, Task<Void, Never>)] {
        let all = state.withLock { state in
            defer {
                state.entries.removeAll()
                state.closed = true
            }
            return state.entries
        }
        for entry in all.values { entry.task.cancel() }
        return all.map { (($0.value.id, $0.key), $0.value.task) }
    }
}
