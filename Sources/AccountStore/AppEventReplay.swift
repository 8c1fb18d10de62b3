import Foundation
import Logging
import PostgresNIO

/// `siwa webhooks replay`: enqueue again the app's deliveries of the events
/// recorded since a time (for an app that was down longer than the
/// attempts), read back from the audit trail with the mapping that enqueued
/// them first (siwa.app_events_of, sql/014), so each keeps its webhook-id
/// and the app can tell what it has seen. An event whose delivery is still
/// pending is not enqueued twice. One statement, with its audit row.
public struct AppEventReplay: Sendable {
    public struct Outcome: Sendable, Equatable {
        public let enqueued: Int
        /// Events whose delivery was pending already.
        public let alreadyPending: Int
        /// More events than the limit: run again from this time (ISO 8601).
        public let continueFrom: String?
    }

    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The actions an app event comes from (siwa.app_events_of).
    static let actions = ["notification.recorded", "user.signed_in", "user.deletion_requested", "token.invalid_grant",
                          "purge.cancelled", "job.completed", "job.discarded"]

    /// Throws `AppEventReplayRefused` while the webhook is off (no worker
    /// has SIWA_APP_WEBHOOK_URL: nothing would deliver them).
    public func replay(since: Date, sub: String?, limit: Int, loginHint: String?) async throws -> Outcome {
        let rows = try await client.withGuardedTransaction(logger: logger) { [logger] connection in
            try await connection.query("""
                WITH switch AS (
                    SELECT enabled FROM siwa.app_webhook
                ), events AS MATERIALIZED (
                    SELECT a.seq, a.apple_sub, a.occurred_at, e.event_position, e.event_type
                    FROM siwa.audit_log AS a,
                         LATERAL siwa.app_events_of(a.action, a.details,
                             CASE WHEN a.action LIKE 'job.%'
                                  THEN siwa.app_event_job_kind((a.details->>'job_id')::bigint, a.apple_sub, a.seq) END) AS e
                    WHERE a.action = ANY(\(Self.actions)::text[]) AND a.occurred_at >= \(since)::timestamptz
                      -- the day index (sql/010) for a range, the sub's for a user
                      AND (a.occurred_at AT TIME ZONE 'UTC')::date >= (\(since)::timestamptz AT TIME ZONE 'UTC')::date
                      AND (\(sub)::text IS NULL OR a.apple_sub = \(sub)::text)
                      AND (SELECT enabled FROM switch)
                    ORDER BY a.seq, e.event_position
                    LIMIT \(limit + 1)
                ), chosen AS (
                    SELECT * FROM events ORDER BY seq, event_position LIMIT \(limit)
                ), fresh AS (
                    SELECT chosen.* FROM chosen
                    WHERE NOT EXISTS (SELECT FROM siwa.jobs AS j
                                      WHERE j.kind = 'app_event' AND j.state IN ('available', 'running', 'retryable')
                                        AND j.args->>'apple_sub' = chosen.apple_sub
                                        AND j.args->>'event_id' = 'evt_' || chosen.seq || '_' || chosen.event_position)
                ), enqueued AS (
                    INSERT INTO siwa.jobs (kind, args, run_at)
                    SELECT 'app_event', siwa.app_event_args(seq, apple_sub, event_position, event_type),
                           siwa.app_event_run_at(apple_sub)
                    FROM fresh ORDER BY seq, event_position
                    RETURNING id
                ), audit AS (
                    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
                    SELECT 'admin', 'app_events.replayed', \(sub)::text,
                           jsonb_build_object('since', siwa.utc_iso(\(since)::timestamptz), 'enqueued', (SELECT count(*) FROM enqueued),
                                              'already_pending', (SELECT count(*) FROM chosen) - (SELECT count(*) FROM fresh),
                                              'db_user', session_user::text, 'login_hint', \(loginHint)::text)
                    WHERE (SELECT enabled FROM switch)
                ), wake AS (
                    SELECT pg_notify('siwa_jobs', 'app_event') WHERE EXISTS (SELECT FROM enqueued)
                )
                SELECT (SELECT enabled FROM switch), (SELECT count(*) FROM enqueued)::bigint,
                       ((SELECT count(*) FROM chosen) - (SELECT count(*) FROM fresh))::bigint,
                       (SELECT siwa.utc_iso(occurred_at) FROM events ORDER BY seq DESC, event_position DESC OFFSET 0 LIMIT 1),
                       (SELECT count(*) FROM events)::bigint, (SELECT count(*) FROM wake)
                """, logger: logger).collect()
        }
        guard let row = rows.first else { throw AppEventReplayRefused(description: "the replay answered nothing") }
        let (enabled, enqueued, pending, last, found, _) = try row.decode((Bool?, Int64, Int64, String?, Int64, Int64).self)
        guard enabled == true else {
            throw AppEventReplayRefused(description: "the app webhook is off: no worker has started with SIWA_APP_WEBHOOK_URL, so nothing would deliver the events (siwa.app_webhook)")
        }
        return Outcome(enqueued: Int(enqueued), alreadyPending: Int(pending), continueFrom: found > limit ? last : nil)
    }
}

/// The replay cannot run (the webhook is off).
public struct AppEventReplayRefused: Error, Sendable, CustomStringConvertible {
    public let description: String
}
