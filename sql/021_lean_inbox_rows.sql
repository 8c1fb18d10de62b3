-- Leaner rows per notification (issue 20, §6): the inbox statement
-- (RecordNotificationStatement) writes less, and what reads its rows says
-- the same as before.
--
-- * siwa.notifications.claims holds the verified claims the row's columns
--   do not hold: `exp`, and an email event's `events.email` and
--   `events.is_private_email`. `jti`, `aud` (audience), `iat` (issued_at),
--   `events.type` (event_type), `events.sub` (apple_sub) and
--   `events.event_time` (event_time) are the columns; `iss` is always
--   Apple's. Rows written before this migration hold them all; readers
--   (the purge's redaction, the app's payload below) read only the email
--   and the relay flag, where both kinds keep them.
-- * A `notification.recorded` audit row's details hold only the keys that
--   apply: no null job ids, and `older_than_sign_in` and `consent_revoked`
--   only for a consent revocation (for any other event both are false).
--   The app's payload below still says `older_than_sign_in: false` for
--   every other Apple event, as before.

-- As sql/015's, with `older_than_sign_in` false where the row leaves it out.
CREATE OR REPLACE FUNCTION siwa.app_event_payload(event_seq bigint, app_type text, include_email boolean,
                                                  OUT occurred_at text, OUT data jsonb)
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN app_type LIKE 'apple.%' AND a.details ? 'event_time'
                THEN siwa.utc_iso(to_timestamp((a.details->>'event_time')::bigint / 1000.0))
                ELSE siwa.utc_iso(a.occurred_at) END,
           jsonb_build_object('sub', a.apple_sub) || jsonb_strip_nulls(CASE
               WHEN app_type LIKE 'apple.%' THEN jsonb_build_object(
                   'apple_type', a.details->>'event_type', 'jti', a.details->>'jti',
                   'event_time', (a.details->>'event_time')::bigint,
                   'is_private_email', CASE n.claims->'events'->>'is_private_email' WHEN 'true' THEN true
                                                                                 WHEN 'false' THEN false END,
                   'email', CASE WHEN include_email THEN n.claims->'events'->>'email' END,
                   'purge', (a.details->>'purge')::boolean,
                   'purge_after', a.details->'purge_after',
                   'older_than_sign_in', coalesce((a.details->>'older_than_sign_in')::boolean, false))
               WHEN app_type = 'consent.revoked' THEN jsonb_build_object(
                   'source', CASE a.action WHEN 'token.invalid_grant' THEN 'invalid_grant' ELSE 'apple' END,
                   'purge', (a.details->>'purge')::boolean,
                   'purge_after', a.details->'purge_after')
               WHEN app_type = 'user.signed_in' THEN jsonb_build_object(
                   'user_id', a.details->'user_id', 'is_new_user', a.details->'is_new_user',
                   'client_id', a.details->'client_id', 'refresh_token_stored', a.details->'refresh_token_stored')
               WHEN app_type = 'user.deletion_requested' THEN jsonb_build_object(
                   'user_id', a.details->'user_id', 'purge_job_id', a.details->'job_id', 'merged', a.details->'merged')
               WHEN app_type = 'token.invalid_grant' THEN jsonb_build_object(
                   'user_id', a.details->'user_id', 'client_id', a.details->'client_id',
                   'session_ended', a.details->'session_ended',
                   'signed_out', a.details->'signed_out', 'purge', a.details->'purge')
               WHEN app_type = 'purge.cancelled' THEN jsonb_build_object(
                   'job_id', (a.details->>'job_id')::bigint, 'reason', a.details->'reason')
               WHEN app_type IN ('purge.completed', 'purge.failed') THEN jsonb_build_object(
                   'job_id', (a.details->>'job_id')::bigint,
                   'scope', coalesce(
                       (SELECT CASE WHEN j.args ? 'scope' THEN 'tokens' ELSE 'all' END
                        FROM siwa.jobs AS j WHERE j.id = (a.details->>'job_id')::bigint),
                       (SELECT CASE WHEN e.action = 'job.enqueued' AND e.details ? 'scope' THEN 'tokens' ELSE 'all' END
                        FROM siwa.audit_log AS e
                        WHERE e.apple_sub = a.apple_sub AND e.action IN ('job.enqueued', 'job.scope_widened')
                          AND e.details->>'job_id' = a.details->>'job_id' AND e.seq < a.seq
                        ORDER BY e.seq DESC LIMIT 1)),
                   'attempts', CASE WHEN app_type = 'purge.failed' THEN a.details->'attempt' END,
                   'step', CASE WHEN app_type = 'purge.failed' THEN a.details->'step' END,
                   'error', CASE WHEN app_type = 'purge.failed' THEN a.details->'error' END)
               ELSE '{}'::jsonb END)
    FROM siwa.audit_log AS a
    LEFT JOIN siwa.notifications AS n
           ON a.action = 'notification.recorded' AND n.id = (a.details->>'notification_id')::bigint
    WHERE a.seq = event_seq
$$;
