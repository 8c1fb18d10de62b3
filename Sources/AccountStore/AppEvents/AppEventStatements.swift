import Foundation
import PostgresNIO

/// A delivery to the app this worker holds: the job (for the queue's shared
/// bookkeeping: leases, failures, release) and the event it carries.
public struct ClaimedAppEvent: Sendable, Equatable {
    public let job: ClaimedJob
    /// The webhook-id: `evt_<audit seq>_<n>`, the same for every attempt and replay.
    public let eventID: String
    /// The envelope's `type` (`apple.email-disabled`, `purge.completed`, ...).
    public let eventType: String
    /// The envelope's `timestamp` and `data` (JSON); nil when the job's args
    /// do not name an event its audit row maps to (siwa.app_event_body,
    /// sql/019: a job enqueued by hand, wrongly, or forged), which is
    /// refused, never sent.
    public let occurredAt: String?
    public let data: String?
}

/// Claims up to `limit` runnable deliveries (`app_event` jobs) with their
/// bodies' parts (siwa.app_event_body, sql/019), in one statement, as
/// ClaimJobsStatement does for purges, with one more rule: a delivery waits
/// while an earlier one for the same Apple user is pending (available,
/// running or retryable), so the app hears of a user's events in the order
/// siwa recorded them, even when the first one fails and is retried. The
/// rule is one probe of `jobs_app_event_pending_idx` per candidate.
///
/// No audit row per claim or completion: the event has its own audit row
/// already (its id is that row's seq); a failed attempt is audited as any
/// job's (JobQueue.fail).
public struct ClaimAppEventsStatement: PostgresPreparedStatement {
    public static let name = "siwa_claim_app_events_v3"
    public static let kind = AppEventParameters.kind
    public static let sql = """
        WITH picked AS (
            SELECT id FROM siwa.jobs AS j
            WHERE state IN ('available', 'retryable') AND run_at <= now() AND kind = '\(kind)'
              AND NOT EXISTS (SELECT FROM siwa.jobs AS earlier
                              WHERE earlier.kind = '\(kind)' AND earlier.state IN ('available', 'running', 'retryable')
                                AND earlier.args->>'apple_sub' = j.args->>'apple_sub' AND earlier.id < j.id)
            ORDER BY run_at, id
            LIMIT $2::integer
            FOR UPDATE SKIP LOCKED
        ), claimed AS (
            UPDATE siwa.jobs AS j
            SET state = 'running', attempt = j.attempt + 1, locked_by = $1::text || '/' || gen_random_uuid(),
                locked_until = now() + make_interval(secs => $3::float8), attempted_at = now()
            FROM picked WHERE j.id = picked.id
            RETURNING j.id, j.args, j.attempt, j.max_attempts, j.locked_by
        )
        SELECT claimed.id, claimed.args::text, claimed.attempt, claimed.max_attempts, claimed.locked_by,
               coalesce(body.event_id, 'job_' || claimed.id), coalesce(claimed.args->>'event_type', '?'),
               body.occurred_at, body.data::text
        FROM claimed
        LEFT JOIN LATERAL siwa.app_event_body(claimed.args, $4::boolean) AS body ON true
        ORDER BY claimed.id
        """
    public typealias Row = ClaimedAppEvent

    public var worker: String
    public var limit: Int
    public var leaseSeconds: Double
    public var includeEmail: Bool

    public init(worker: String, limit: Int, leaseSeconds: Double, includeEmail: Bool) {
        self.worker = worker
        self.limit = limit
        self.leaseSeconds = leaseSeconds
        self.includeEmail = includeEmail
    }

    public func makeBindings() throws -> PostgresBindings {
        var b = PostgresBindings(capacity: 4)
        b.append(worker)
        b.append(Int32(clamping: limit))
        b.append(leaseSeconds)
        b.append(includeEmail)
        return b
    }

    public func decodeRow(_ row: PostgresRow) throws -> ClaimedAppEvent {
        let (id, args, attempt, maxAttempts, lease, eventID, eventType, occurredAt, data) =
            try row.decode((Int64, String, Int32, Int32, String, String, String, String?, String?).self)
        let job = ClaimedJob(id: id, kind: Self.kind, attempt: Int(attempt), maxAttempts: Int(maxAttempts), lease: lease,
                             args: Data(args.utf8))
        return ClaimedAppEvent(job: job, eventID: eventID, eventType: eventType, occurredAt: occurredAt, data: data)
    }
}

/// Completes a delivery the app took (guarded by the lease, as every
/// statement that ends a hold): 1 row, or 0 when the lease was lost. The
/// user's next deliveries, pushed back while this one was failing
/// (siwa.app_events_wait_behind, sql/014), may go at once.
///
/// Committed without waiting for the disk (synchronous_commit off for this
/// transaction only): a completion lost in a crash makes the delivery run
/// again, with the same webhook-id, which at-least-once allows; waiting for
/// a flush per delivery capped them at the disk's rate.
public struct CompleteAppEventStatement: PostgresPreparedStatement {
    public static let name = "siwa_complete_app_event_v2"
    public static let sql = """
        WITH done AS (
            UPDATE siwa.jobs SET state = 'completed', finalized_at = now(), locked_until = NULL
            WHERE id = $1::bigint AND locked_by = $2::text AND state = 'running'
            RETURNING id, args->>'apple_sub' AS apple_sub
        ), next AS (
            UPDATE siwa.jobs AS j SET run_at = now()
            FROM done
            WHERE j.kind = '\(ClaimAppEventsStatement.kind)' AND j.state = 'available' AND j.args->>'apple_sub' = done.apple_sub
              AND j.id > done.id AND j.run_at > now()
        )
        SELECT id FROM done, (SELECT set_config('synchronous_commit', 'off', true)) AS async
        """
    public typealias Row = Int64

    public var jobID: Int64
    public var lease: String

    public init(jobID: Int64, lease: String) {
        self.jobID = jobID
        self.lease = lease
    }

    public func makeBindings() throws -> PostgresBindings {
        var b = PostgresBindings(capacity: 2)
        b.append(jobID)
        b.append(lease)
        return b
    }

    public func decodeRow(_ row: PostgresRow) throws -> Int64 { try row.decode(Int64.self) }
}
