import AccountStore
import Foundation

/// Decides, once and in one place, what becomes of a job whose attempt
/// failed or whose lease ran out: retry at a time, or discard. The queue's
/// statements only apply the decision (`JobQueue.fail`, `JobQueue.rescue`),
/// as River's retry policy and its executor's `reportError` do.
public struct RetryPolicy: Sendable {
    /// SIWA_JOB_RETRY_BASE_SECONDS: the first retry's wait (Backoff).
    public var baseSeconds: Double
    /// SIWA_JOB_MAX_ATTEMPTS: no job runs more often than this, nor more
    /// often than its own `max_attempts`.
    public var maxAttempts: Int

    public init(baseSeconds: Double, maxAttempts: Int) {
        self.baseSeconds = baseSeconds
        self.maxAttempts = maxAttempts
    }

    /// After a failed attempt: retry after the backoff while attempts are
    /// left; discard after the last one, or at once when retrying cannot
    /// help (`permanent`: a job without an Apple sub, say).
    public func afterFailure(attempt: Int, jobMaxAttempts: Int, permanent: Bool,
                             jitter: Double = Double.random(in: 0...0.2)) -> RetryDecision {
        guard !permanent, hasAttemptsLeft(attempt: attempt, jobMaxAttempts: jobMaxAttempts) else { return .discard }
        return .retry(afterSeconds: Backoff.delay(attempt: attempt, baseSeconds: baseSeconds, jitter: jitter))
    }

    /// After a run whose lease ran out: its worker stopped or lost the
    /// database, which says nothing against the job, so it runs again at
    /// once (no backoff) while attempts are left. The attempt still counts:
    /// a job that kills its worker every time is discarded in the end.
    public func afterLeaseExpired(attempt: Int, jobMaxAttempts: Int) -> RetryDecision {
        hasAttemptsLeft(attempt: attempt, jobMaxAttempts: jobMaxAttempts) ? .retry(afterSeconds: 0) : .discard
    }

    /// `attempt` (1 on the first run) was not the last allowed.
    func hasAttemptsLeft(attempt: Int, jobMaxAttempts: Int) -> Bool {
        attempt < min(jobMaxAttempts, maxAttempts)
    }
}

/// Retry n waits base × 2^(n−1) seconds, at most 6 hours, plus up to 20%
/// jitter (never below the base figure, never above the cap), so jobs that
/// failed together do not retry in lockstep.
public enum Backoff {
    public static let capSeconds = 6.0 * 3600

    public static func delay(attempt: Int, baseSeconds: Double,
                             jitter: Double = Double.random(in: 0...0.2)) -> Double {
        let exponent = Double(min(max(attempt - 1, 0), 62))
        let plain = min(baseSeconds * pow(2, exponent), capSeconds)
        return min(plain * (1 + jitter), capSeconds)
    }
}
