/// What becomes of a job whose attempt failed or whose lease ran out. The
/// worker decides it (`RetryPolicy`); the queue's statements only apply it
/// (`JobQueue.fail`, `JobQueue.rescue`).
public enum RetryDecision: Sendable, Equatable {
    /// Back to `retryable`, to run again this many seconds after the
    /// database's now(): the queue's one clock, which the claim compares
    /// `run_at` with, so a worker's clock being off moves no retry.
    case retry(afterSeconds: Double)
    /// To `discarded`: no attempt left, or retrying cannot help.
    case discard

    /// The job's new state.
    var state: String {
        if case .discard = self { return "discarded" }
        return "retryable"
    }

    /// `run_at` = now() + this. A discarded job's `run_at` is when it was
    /// discarded (it never runs again unless `siwa jobs retry` says so).
    public var delaySeconds: Double {
        if case .retry(let seconds) = self { return max(seconds, 0) }
        return 0
    }
}

/// A running job whose lease has run out (its worker died, or lost the
/// database for longer than the lease), for the rescuer to decide on.
public struct ExpiredRun: Sendable, Equatable {
    public let id: Int64
    public let kind: String
    /// The attempt that was running (1 on the first).
    public let attempt: Int
    public let maxAttempts: Int
    /// The run's `locked_by`: the rescue applies only while it still holds.
    public let lease: String

    public init(id: Int64, kind: String, attempt: Int, maxAttempts: Int, lease: String) {
        self.id = id
        self.kind = kind
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.lease = lease
    }
}
