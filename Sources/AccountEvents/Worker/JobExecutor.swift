import AccountStore
import Logging

/// Runs one claimed job with its kind's runner, within SIWA_JOB_MAX_RUN_SECONDS,
/// then records what came of it: completed, or a failed attempt that the
/// retry policy sends back to `retryable` or on to `discarded` (River's job
/// executor and its `reportError`).
struct JobExecutor: Sendable {
    let queue: JobQueue
    let kinds: JobKinds
    let retryPolicy: RetryPolicy
    /// The longest one attempt may run (JobWorker.Options.maxRunSeconds).
    let maxRunSeconds: Double
    let metrics: JobMetrics
    let logger: Logger

    func execute(_ job: ClaimedJob) async {
        let metadata: Logger.Metadata = ["job": "\(job.id)", "attempt": "\(job.attempt)"]
        do {
            switch try await runWithinMaxRunTime(job) {
            case .completed:
                metrics.completed(kind: job.kind)
                logger.info("Job completed", metadata: metadata)
            case .snoozed:
                logger.info("Job waits for its time", metadata: metadata)
            case .leaseLost:
                logger.warning("Lease lost; another worker will finish the job", metadata: metadata)
            }
        } catch {
            // Cancelled: shutdown (the job is released) or lease lost.
            if Task.isCancelled { return }
            await recordFailure(of: job, StepFailure(step: "-", error: error), metadata: metadata)
        }
    }

    private func recordFailure(of job: ClaimedJob, _ failure: StepFailure, metadata: Logger.Metadata) async {
        let decision = retryPolicy.afterFailure(attempt: job.attempt, jobMaxAttempts: job.maxAttempts, permanent: failure.permanent)
        do {
            let outcome = try await queue.fail(job, step: failure.step, error: failure.detail, auditError: failure.summary,
                                               decision: decision, unbackedSteps: failure.unbackedSteps)
            var details = metadata
            details["step"] = "\(failure.step ?? "-")"
            details["error"] = "\(failure.summary)"
            switch outcome {
            case .retryable:
                metrics.retried(kind: job.kind)
                details["in_seconds"] = "\(Int(decision.delaySeconds.rounded(.up)))"
                logger.warning("Job failed; will retry", metadata: details)
            case .discarded:
                metrics.discarded(kind: job.kind)
                if failure.unbackedSteps.isEmpty {
                    logger.error("Job discarded after its last attempt", metadata: details)
                } else {
                    logger.error("Purge completion refused: the job claims steps the audit trail does not show; discarded, no receipt",
                                 metadata: details)
                }
            case .leaseLost:
                logger.warning("Job failed after its lease was lost", metadata: details)
            }
        } catch {
            // The job keeps its lease until it expires, then is rescued.
            logger.warning("Cannot record a failed attempt; the job will be rescued when its lease expires",
                           metadata: metadata.merging(["error": "\(safeDescription(error))"]) { $1 })
        }
    }

    /// Runs the job for at most `maxRunSeconds`. Past that the run is
    /// cancelled, and waited for (every step stops promptly when cancelled:
    /// its database connection is closed, its HTTP request dropped), so the
    /// failure is recorded only once nothing of this run is still going on.
    private func runWithinMaxRunTime(_ job: ClaimedJob) async throws -> JobRunOutcome {
        let limit = maxRunSeconds
        guard let runner = kinds.runner(for: job.kind) else {
            // Cannot happen: the claim asks only for registered kinds.
            let text = "no runner for job kind \(job.kind) in this worker"
            throw StepFailure(step: nil, detail: text, summary: text, permanent: true)
        }
        return try await withThrowingTaskGroup(of: JobRunOutcome?.self) { group in
            group.addTask { try await runner.run(job) }
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
