import AccountStore
import Logging
import Tracing

/// What wraps every kind's run, in one place (swift-jobs' `JobMiddleware`):
/// the `siwa.job` span around an attempt, the job counters of `JobMetrics`
/// (claimed, completed, retried, discarded) and the "completed" / "failed"
/// log lines. A kind reports only its own steps (`JobMetrics.measure`).
struct JobInstrumentation: Sendable {
    let metrics: JobMetrics
    let logger: Logger

    static func metadata(_ job: ClaimedJob) -> Logger.Metadata {
        ["job": "\(job.id)", "attempt": "\(job.attempt)"]
    }

    func claimed(_ jobs: [ClaimedJob]) {
        metrics.claimed(jobs)
    }

    /// Jobs that a kind's batch step completed (they never run on their own).
    func completed(_ jobs: [ClaimedJob]) {
        for job in jobs { completed(job) }
    }

    private func completed(_ job: ClaimedJob) {
        metrics.completed(kind: job.kind)
        logger.info("Job completed", metadata: Self.metadata(job))
    }

    /// One attempt at `job` (`body`), as a span (`siwa.job`, a no-op unless a
    /// tracer is bootstrapped) holding its steps' spans; how it ended is
    /// logged and counted here. A throw is the caller's to record (`failed`).
    func run(_ job: ClaimedJob, _ body: () async throws -> JobRunOutcome) async throws -> JobRunOutcome {
        try await withSpan("siwa.job", ofKind: .consumer) { span in
            span.attributes["siwa.job.id"] = Int(job.id)
            span.attributes["siwa.job.kind"] = job.kind
            span.attributes["siwa.job.attempt"] = job.attempt
            let outcome = try await body()
            // Inside the span, so that these lines name its trace (trace_id).
            switch outcome {
            case .completed:
                completed(job)
            case .snoozed:
                logger.info("Job waits for its time", metadata: Self.metadata(job))
            case .leaseLost:
                logger.warning("Lease lost; another worker will finish the job", metadata: Self.metadata(job))
            }
            return outcome
        }
    }

    /// A failed attempt, as the queue recorded it (`decision` from the retry policy).
    func failed(_ job: ClaimedJob, _ failure: StepFailure, decision: RetryDecision, outcome: FailureOutcome) {
        var details = Self.metadata(job)
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
                logger.error("Job completion refused: the job claims steps the audit trail does not show; discarded",
                             metadata: details)
            }
        case .leaseLost:
            logger.warning("Job failed after its lease was lost", metadata: details)
        }
    }

    /// A failed attempt the queue could not record.
    func failureNotRecorded(_ job: ClaimedJob, _ error: any Error) {
        // The job keeps its lease until it expires, then is rescued.
        logger.warning("Cannot record a failed attempt; the job will be rescued when its lease expires",
                       metadata: Self.metadata(job).merging(["error": "\(safeDescription(error))"]) { $1 })
    }
}
