import AccountStore
import Logging

/// Runs one claimed job with its kind's runner, within SIWA_JOB_MAX_RUN_SECONDS,
/// inside the wrapper every kind's run gets (JobInstrumentation), then
/// records what came of it: completed, or a failed attempt that the retry
/// policy sends back to `retryable` or on to `discarded` (River's job
/// executor and its `reportError`).
struct JobExecutor: Sendable {
    let queue: JobQueue
    let runners: JobRunners
    let retryPolicy: RetryPolicy
    /// The longest one attempt may run (JobWorker.Options.maxRunSeconds).
    let maxRunSeconds: Double
    let instrumentation: JobInstrumentation

    func execute(_ job: ClaimedJob) async {
        do {
            _ = try await instrumentation.run(job) { try await runWithinMaxRunTime(job) }
        } catch {
            // Cancelled: shutdown (the job is released) or lease lost.
            if Task.isCancelled { return }
            await recordFailure(of: job, StepFailure(step: "-", error: error))
        }
    }

    private func recordFailure(of job: ClaimedJob, _ failure: StepFailure) async {
        let decision = retryPolicy.afterFailure(attempt: job.attempt, jobMaxAttempts: job.maxAttempts, permanent: failure.permanent)
        do {
            let outcome = try await queue.fail(job, step: failure.step, error: failure.detail, auditError: failure.summary,
                                               decision: decision, unbackedSteps: failure.unbackedSteps)
            instrumentation.failed(job, failure, decision: decision, outcome: outcome)
        } catch {
            instrumentation.failureNotRecorded(job, error)
        }
    }

    /// Runs the job for at most `maxRunSeconds`. Past that the run is
    /// cancelled, and waited for (every step stops promptly when cancelled:
    /// its database connection is closed, its HTTP request dropped), so the
    /// failure is recorded only once nothing of this run is still going on.
    private func runWithinMaxRunTime(_ job: ClaimedJob) async throws -> JobRunOutcome {
        let limit = maxRunSeconds
        guard let runner = runners.runner(for: job.kind) else {
            // Cannot happen: the claim asks only for registered kinds.
            let text = "no runner for job kind \(job.kind) in this worker"
            throw StepFailure(step: nil, detail: text, summary: text, permanent: true)
        }
        return try await withThrowingTaskGroup(of: JobRunOutcome?.self) { group in
            group.addTask { try await runner.run(decoding: job) }
            group.addTask {
                try await Task.sleep(for: .seconds(limit))
                return nil
            }
            var timedOut = false
            do {
                while let event = try await group.next() {
                    if let outcome = event {
                        group.cancelAll()
                        return outcome
                    }
                    // The time is up: stop the run and wait for it.
                    timedOut = true
                    group.cancelAll()
                }
            } catch {
                group.cancelAll()
                guard timedOut, !Task.isCancelled else { throw error }
            }
            let text = "timed out: the attempt ran past SIWA_JOB_MAX_RUN_SECONDS (\(limit.formattedSeconds) s) and was stopped"
            throw StepFailure(step: nil, detail: text, summary: text, permanent: false)
        }
    }
}
