import AccountStore
import Foundation
import PostgresNIO

/// One kind of job (`siwa.jobs.kind`) and how the worker runs it. The worker
/// claims only the kinds registered with it (`JobRunners`) and hands each
/// claimed job to its kind's runner, with the job's args decoded as the
/// kind's `Parameters`. What every run gets, whatever its kind (the
/// `siwa.job` span, the job counters, the "completed" and "failed" log
/// lines), comes from the wrapper around it (JobInstrumentation), not from
/// the kind.
///
/// To add a kind: its `JobParameters` type (with the kind's name), a runner
/// conforming to this protocol, its SQL (enqueued in the transaction of the
/// event that makes its jobs), and the runner's line in `JobKinds`. The
/// worker then claims it, keeps its leases, retries it with the backoff
/// (`RetryPolicy`), rescues it and counts it in the metrics, like any other.
public protocol JobKindRunner: Sendable {
    /// The kind's arguments, decoded from the job's args for each run.
    associatedtype Parameters: JobParameters

    /// The `kind` column of this kind's jobs (its parameters' `kind`).
    static var kind: String { get }

    /// This kind's runner in a worker with `resources`; nil when the
    /// worker does not run the kind (its settings are absent).
    static func make(_ resources: JobKindResources) -> (any JobKindRunner)?

    /// Steps whose duration series exist from the start (the kind's own
    /// step names, as it reports them to `JobMetrics.measure`).
    var stepNames: [String] { get }

    /// One attempt at one job. Record each step as it completes
    /// (`JobQueue.recordStep`, `JobQueue.inStepTransaction`); the last
    /// record completes the job. Throw a `StepFailure` (any other error is
    /// described by `StepFailure.init(step:error:)`) to fail the attempt:
    /// the worker's retry policy decides whether it is retried or discarded.
    /// Must stop promptly when cancelled (shutdown, a lost lease, the run's
    /// time limit).
    func run(_ job: ClaimedJob, _ parameters: Parameters) async throws -> JobRunOutcome

    /// The kind's jobs of one claim, before each runs on its own: a chance to
    /// look up what they need and do their first step for the whole batch
    /// in one statement (a built-in first step, say). Returns the jobs left
    /// to run, one by one, and those it completed; a job whose lease it
    /// found lost is in neither.
    func runBatchStep(for jobs: [ClaimedJob]) async -> BatchStepOutcome
}

extension JobKindRunner {
    public static var kind: String { Parameters.kind }

    public var stepNames: [String] { [] }

    public func runBatchStep(for jobs: [ClaimedJob]) async -> BatchStepOutcome { BatchStepOutcome(left: jobs) }

    /// The job's args as this kind's parameters, then `run`. Args that
    /// cannot be read fail the job for good: retrying reads the same.
    func run(decoding job: ClaimedJob) async throws -> JobRunOutcome {
        let parameters: Parameters
        do {
            parameters = try job.parameters(as: Parameters.self)
        } catch {
            let text = "the job's args are not a JSON object of its kind's arguments"
            throw StepFailure(step: nil, detail: "\(text): \(error)", summary: text, permanent: true)
        }
        return try await run(job, parameters)
    }
}

/// What a kind's batch step did with the jobs of one claim.
public struct BatchStepOutcome: Sendable {
    /// To run one by one, in claim order (with the steps it recorded).
    public var left: [ClaimedJob]
    /// Completed by the batch step itself.
    public var completed: [ClaimedJob]

    public init(left: [ClaimedJob], completed: [ClaimedJob] = []) {
        self.left = left
        self.completed = completed
    }
}

/// A kind whose jobs are claimed by a statement of its own instead of the
/// shared `ClaimJobsStatement`: for a kind whose rule for which job may run
/// next is more than "oldest `run_at` first" (the app's deliveries: a
/// user's next one waits while an earlier one is pending).
///
/// Why a claim of its own and not an extra condition spliced into the
/// shared claim: that statement is one prepared text for every kind (a
/// per-kind condition would make it text composed per worker from the
/// kinds' SQL fragments, prepared per combination), and a kind that needs
/// its own order usually needs its own claim in other ways too (the
/// delivery's claim builds each body in the same statement and writes no
/// `job.claimed` audit row: the event it carries has its row already).
///
/// The claim must leave each job as the shared one does (state `running`,
/// `attempt` + 1, `locked_until`, `locked_by` = the queue's worker name,
/// '/', a new UUID, and `ClaimedJob.lease` = that `locked_by`), so the lease
/// keeper, the rescuer, `JobQueue.fail` and `release` treat its jobs as any
/// others.
public protocol SelfClaimingJobKindRunner: JobKindRunner {
    /// Up to `limit` of this kind's runnable jobs, each under a new lease.
    func claim(limit: Int, leaseSeconds: Double) async throws -> [ClaimedJob]
}

/// The job kinds a worker runs, each with its runner (`JobKinds.runners`).
public struct JobRunners: Sendable {
    private let runners: [any JobKindRunner]

    /// - Precondition: each kind registered once.
    public init(_ runners: [any JobKindRunner]) {
        let names = runners.map { type(of: $0).kind }
        precondition(Set(names).count == names.count, "a job kind is registered twice: \(names)")
        self.runners = runners
    }

    /// The kinds, in the order they were registered.
    public var names: [String] { runners.map { type(of: $0).kind } }

    /// The kinds the shared claim asks for: those without a claim of their own.
    public var sharedClaimNames: [String] {
        runners.filter { !($0 is any SelfClaimingJobKindRunner) }.map { type(of: $0).kind }
    }

    /// The kinds that claim their own jobs, in the order they were
    /// registered: each takes the slots the shared claim and those before it left.
    public var selfClaiming: [any SelfClaimingJobKindRunner] {
        runners.compactMap { $0 as? any SelfClaimingJobKindRunner }
    }

    /// Every kind's step names.
    public var stepNames: [String] { runners.flatMap(\.stepNames) }

    public func runner(for kind: String) -> (any JobKindRunner)? {
        runners.first { type(of: $0).kind == kind }
    }

    /// Each kind's batch step for its jobs of one claim; the jobs left to
    /// run one by one come back in claim order.
    func runBatchSteps(for jobs: [ClaimedJob]) async -> BatchStepOutcome {
        guard let first = jobs.first else { return BatchStepOutcome(left: []) }
        // The common case, one kind in the claim: no regrouping.
        if jobs.allSatisfy({ $0.kind == first.kind }) {
            return await runner(for: first.kind)?.runBatchStep(for: jobs) ?? BatchStepOutcome(left: jobs)
        }
        // The jobs as their batch steps return them (with the steps they recorded).
        var left: [Int64: ClaimedJob] = [:]
        var completed: [ClaimedJob] = []
        for runner in runners {
            let own = jobs.filter { $0.kind == type(of: runner).kind }
            guard !own.isEmpty else { continue }
            let outcome = await runner.runBatchStep(for: own)
            for job in outcome.left { left[job.id] = job }
            completed += outcome.completed
        }
        return BatchStepOutcome(left: jobs.compactMap { runner(for: $0.kind) == nil ? $0 : left[$0.id] }, completed: completed)
    }
}

public enum JobRunOutcome: Sendable, Equatable {
    case completed
    /// The job waits (`JobQueue.snooze`): it runs again at its time.
    case snoozed
    /// The lease was lost mid-run (the job was rescued; another worker may
    /// hold it now): stop without writing anything.
    case leaseLost
}

/// A step failed; the job is retried (or discarded when `permanent`, or
/// after its last attempt: `RetryPolicy`).
public struct StepFailure: Error, Sendable, CustomStringConvertible {
    public let step: String?
    /// For the job's error history (may include the database's own message).
    public let detail: String
    /// For the audit trail and logs: no server text, which can quote data.
    public let summary: String
    /// Retrying cannot help (e.g. a job whose args lack what its kind needs).
    public let permanent: Bool
    /// The steps a completion claimed without their audit rows (SQLSTATE
    /// SW001, the completion check of sql/017): the job is discarded with a
    /// `job.completion_refused` row naming them. Empty for other failures.
    public var unbackedSteps: [String] = []

    public init(step: String?, detail: String, summary: String, permanent: Bool) {
        self.step = step
        self.detail = detail
        self.summary = summary
        self.permanent = permanent
    }

    public var description: String { step.map { "step \($0): \(summary)" } ?? summary }

    /// What the completion check of sql/017 raises.
    public static let completionRefusedState = "SW001"

    /// Any error of a step, described. The error history gets the
    /// database's message (an operator needs "relation app.profiles does not
    /// exist"); the audit trail and logs get the SQLSTATE only.
    public init(step: String?, error: any Error) {
        if let failure = error as? StepFailure {
            self = failure
            return
        }
        if let psql = error as? PSQLError {
            let state = psql.serverInfo?[.sqlState] ?? "-"
            if state == "57014" {
                // query_canceled: siwa sends no cancel requests, so this is the step's statement_timeout.
                let text = "timed out: a statement ran past the step's timeout_seconds (statement_timeout, sqlstate 57014)"
                self.init(step: step, detail: text, summary: text, permanent: false)
                return
            }
            if state == Self.completionRefusedState {
                // The job row claims steps the trail does not show (written
                // by hand, not by a worker): retrying would claim them again.
                let steps = (psql.serverInfo?[.detail]).flatMap { try? JSONDecoder().decode([String].self, from: Data($0.utf8)) } ?? []
                let text = "completion refused: no job.step_completed audit row by the worker's role for "
                    + (steps.isEmpty ? "a step it claims" : steps.joined(separator: ", "))
                self.init(step: step, detail: text, summary: text, permanent: true)
                unbackedSteps = steps
                return
            }
            if state == "55P03" {
                // lock_not_available: a lock held past the session's lock_timeout (SessionLimits.runtime).
                let text = "timed out waiting for a lock another session holds (lock_timeout, sqlstate 55P03)"
                self.init(step: step, detail: text, summary: text, permanent: false)
                return
            }
            let message = psql.serverInfo?[.message].map { ": \($0)" } ?? ""
            self.init(step: step, detail: "SQL failed, sqlstate \(state)\(message)",
                      summary: "SQL failed, sqlstate \(state)", permanent: false)
            return
        }
        if let limit = error as? TimeLimitExceeded {
            let text = "timed out: no answer from the database within \(limit.seconds.formattedSeconds) s"
            self.init(step: step, detail: text, summary: text, permanent: false)
            return
        }
        self.init(step: step, detail: "\(type(of: error))", summary: "\(type(of: error))", permanent: false)
    }
}
