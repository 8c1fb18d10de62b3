import Foundation
import PostgresNIO

/// The one statement that records a notification and applies its effects.
///
/// Every step hangs off the inbox insert's RETURNING, so a duplicate `jti`
/// (ON CONFLICT DO NOTHING returns no row) changes nothing at all. The user
/// upsert applies the rules that make late delivery harmless: an email state
/// only replaces an older one (by `event_time`), consent revocation only
/// replaces an older active state, and a deleted user is never touched again.
/// The purge job is unique while pending (see `jobs_one_pending_purge_idx`);
/// `pg_notify` wakes the worker when the transaction commits.
///
/// `siwa-bench` (`make bench`) runs this same text under pgbench to measure the ceiling.
public struct RecordNotificationStatement: PostgresPreparedStatement {
    public static let name = "siwa_record_notification_v1"

    public static let sql = """
        WITH inbox AS (
            INSERT INTO siwa.notifications (jti, event_type, apple_sub, event_time, audience, issued_at, claims)
            VALUES ($1::text, $2::text, $3::text, $4::bigint, $5::text, $6::timestamptz, $7::text::jsonb)
            ON CONFLICT (jti) DO NOTHING
            RETURNING id
        ), account AS (
            INSERT INTO siwa.users AS u (apple_sub, status, status_event_time, email, is_private_email,
                                         email_forwarding_enabled, email_event_time)
            SELECT $3::text, coalesce($11::text, 'active'), CASE WHEN $11::text IS NOT NULL THEN $4::bigint END,
                   $9::text, $10::boolean, coalesce($8::boolean, true), CASE WHEN $8::boolean IS NOT NULL THEN $4::bigint END
            FROM inbox
            ON CONFLICT (apple_sub) DO UPDATE SET
                email_forwarding_enabled = CASE WHEN $8::boolean IS NOT NULL AND (u.email_event_time IS NULL OR u.email_event_time < $4::bigint)
                                                THEN $8::boolean ELSE u.email_forwarding_enabled END,
                email = CASE WHEN $9::text IS NOT NULL AND (u.email_event_time IS NULL OR u.email_event_time < $4::bigint)
                             THEN $9::text ELSE u.email END,
                is_private_email = CASE WHEN $10::boolean IS NOT NULL AND (u.email_event_time IS NULL OR u.email_event_time < $4::bigint)
                                        THEN $10::boolean ELSE u.is_private_email END,
                email_event_time = CASE WHEN $8::boolean IS NOT NULL AND (u.email_event_time IS NULL OR u.email_event_time < $4::bigint)
                                        THEN $4::bigint ELSE u.email_event_time END,
                status = CASE WHEN $11::text = 'deleted' THEN 'deleted'
                              WHEN $11::text = 'consent_revoked' AND u.status = 'active'
                                   AND (u.status_event_time IS NULL OR u.status_event_time < $4::bigint) THEN 'consent_revoked'
                              ELSE u.status END,
                status_event_time = CASE WHEN $11::text = 'deleted'
                                           OR ($11::text = 'consent_revoked' AND u.status = 'active'
                                               AND (u.status_event_time IS NULL OR u.status_event_time < $4::bigint))
                                         THEN $4::bigint ELSE u.status_event_time END,
                updated_at = now()
            WHERE u.status <> 'deleted'
            RETURNING u.id
        ), purge AS (
            INSERT INTO siwa.jobs (kind, args)
            SELECT 'purge_user', jsonb_build_object('apple_sub', $3::text, 'event_type', $2::text, 'jti', $1::text)
            FROM inbox WHERE $12::boolean
            ON CONFLICT (kind, (args->>'apple_sub')) WHERE kind = 'purge_user' AND state IN ('available', 'running', 'retryable')
            DO NOTHING
            RETURNING id
        ), audit AS (
            INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
            SELECT 'apple', 'notification.recorded', $3::text,
                   jsonb_build_object('jti', $1::text, 'event_type', $2::text, 'notification_id', inbox.id,
                                      'event_time', $4::bigint, 'purge_job_id', (SELECT id FROM purge))
            FROM inbox
        )
        SELECT (SELECT id FROM inbox) AS notification_id,
               (SELECT id FROM purge) AS purge_job_id,
               (SELECT count(pg_notify('siwa_jobs', 'purge_user')) FROM purge) AS notified
        """

    public typealias Row = (Int64?, Int64?)

    public var entry: InboxEntry

    public init(entry: InboxEntry) { self.entry = entry }

    public func makeBindings() throws -> PostgresBindings {
        var b = PostgresBindings(capacity: 12)
        let e = entry
        b.append(e.jti)
        b.append(e.eventType)
        b.append(e.appleSub)
        b.append(e.eventTime)
        b.append(e.audience)
        b.append(e.issuedAt)
        b.append(e.claimsJSON)
        b.append(e.effect.emailForwardingEnabled)
        b.append(e.effect.email)
        b.append(e.effect.isPrivateEmail)
        b.append(e.effect.status?.rawValue)
        b.append(e.effect.enqueuePurge)
        return b
    }

    public func decodeRow(_ row: PostgresRow) throws -> Row {
        let (notificationID, purgeJobID, _) = try row.decode((Int64?, Int64?, Int64).self)
        return (notificationID, purgeJobID)
    }

    public static func outcome(of row: Row?) -> InboxOutcome {
        guard let (notificationID, purgeJobID) = row, let notificationID else { return .duplicate }
        return .recorded(notificationID: notificationID, purgeJobID: purgeJobID)
    }
}
