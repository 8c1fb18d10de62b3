-- The answers admins ask for, as views in schema siwa that siwa_auditor can
-- read (`siwa audit` and the admin routes query the same): a user's whole
-- story, each purge's latency, a summary per day, and what needs attention.
-- They hold no email address, no name and no token.
--
-- The job queue prunes finished jobs (SIWA_JOB_RETENTION_DAYS), so the views
-- are built from the audit trail, which stays. What the trail lacked, when a
-- purge was requested and whether it purges data or only signs the user out
-- (args.scope 'tokens'), is recorded here by two triggers on siwa.jobs, in
-- the transaction that enqueues, whoever enqueues: the receiver, in-app
-- deletion, token validation, a rerun, or an operator's plain INSERT.

-- Times in details, as ISO 8601 in UTC whatever the session's time zone.
CREATE FUNCTION siwa.utc_iso(instant timestamptz) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT to_char(instant AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;

-- ------------------------------------------------------------ durable rows --

-- `job.enqueued`: one row per job, with its creation time (`requested_at`:
-- the job's own created_at, which an operator's INSERT may set). A row
-- trigger: it costs nothing for the statements that enqueue no job.
CREATE FUNCTION siwa.audit_job_enqueued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('queue', 'job.enqueued', NEW.args->>'apple_sub',
            jsonb_strip_nulls(jsonb_build_object(
                'job_id', NEW.id, 'kind', NEW.kind, 'event_type', NEW.args->>'event_type', 'scope', NEW.args->>'scope',
                'rerun_of', NEW.args->'rerun_of', 'state', NEW.state, 'requested_at', siwa.utc_iso(NEW.created_at),
                'db_user', session_user::text)));
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_audit_enqueued
    AFTER INSERT ON siwa.jobs
    FOR EACH ROW EXECUTE FUNCTION siwa.audit_job_enqueued();

-- `job.scope_widened`: a pending sign-out (token-only) job became a whole
-- purge (a deletion merged into it); the deletion was requested now.
CREATE FUNCTION siwa.audit_job_widened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('queue', 'job.scope_widened', NEW.args->>'apple_sub',
            jsonb_strip_nulls(jsonb_build_object(
                'job_id', NEW.id, 'kind', NEW.kind, 'event_type', NEW.args->>'event_type',
                'from_scope', OLD.args->>'scope', 'requested_at', siwa.utc_iso(now()), 'db_user', session_user::text)));
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_audit_widened
    AFTER UPDATE OF args ON siwa.jobs
    FOR EACH ROW WHEN (OLD.args ? 'scope' AND NOT NEW.args ? 'scope')
    EXECUTE FUNCTION siwa.audit_job_widened();

-- The purges requested before this migration: those still queued from
-- their rows, the pruned ones from the earliest audit row that enqueued
-- them (one pass over the trail); marked `backfilled`.
INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
SELECT 'migrate', 'job.enqueued', apple_sub,
       jsonb_strip_nulls(jsonb_build_object('job_id', job_id, 'kind', 'purge_user', 'event_type', event_type, 'scope', scope,
                                            'requested_at', siwa.utc_iso(requested_at), 'backfilled', true))
FROM (
    SELECT id AS job_id, args->>'apple_sub' AS apple_sub, args->>'event_type' AS event_type, args->>'scope' AS scope,
           created_at AS requested_at
    FROM siwa.jobs WHERE kind = 'purge_user'
    UNION ALL
    (SELECT DISTINCT ON (job_id) job_id, apple_sub, event_type, scope, requested_at
     FROM (SELECT a.seq, a.apple_sub, a.occurred_at AS requested_at,
                  CASE a.action WHEN 'notification.recorded'
                                THEN coalesce(a.details->>'purge_job_id', a.details->>'sign_out_job_id')
                                ELSE a.details->>'job_id' END::bigint AS job_id,
                  CASE a.action WHEN 'notification.recorded' THEN a.details->>'event_type'
                                WHEN 'user.deletion_requested' THEN 'app-deletion'
                                WHEN 'token.invalid_grant' THEN 'token-invalid-grant' END AS event_type,
                  CASE WHEN (a.action = 'notification.recorded' AND a.details->>'purge_job_id' IS NULL)
                         OR (a.action = 'token.invalid_grant' AND a.details->>'purge' = 'false') THEN 'tokens' END AS scope
           FROM siwa.audit_log AS a
           WHERE a.action IN ('notification.recorded', 'user.deletion_requested', 'token.invalid_grant', 'job.rerun_enqueued')
             -- a deletion merged into a pending job requested nothing new
             AND (a.action <> 'user.deletion_requested' OR a.details->>'merged' = 'false')) AS requested
     WHERE job_id IS NOT NULL AND NOT EXISTS (SELECT FROM siwa.jobs WHERE jobs.id = requested.job_id)
     ORDER BY job_id, seq)
) AS earlier
ORDER BY requested_at, job_id;

-- Summaries read the trail by day: a BRIN index, a few pages for millions
-- of rows, cheap to keep up on an append-only table whose rows arrive in
-- time order. autosummarize: autovacuum summarizes each range of pages once
-- it is full (a range not yet summarized is read whole).
CREATE INDEX audit_log_day_brin ON siwa.audit_log USING brin (((occurred_at AT TIME ZONE 'UTC')::date))
    WITH (autosummarize = on);

-- The purge SLA, SIWA_PURGE_SLA_HOURS, for siwa.attention: a view cannot
-- read a setting, and every reader (psql as siwa_auditor, `siwa audit`, the
-- admin page) must see the same one. `siwa migrate` writes it on each run.
CREATE TABLE siwa.report_settings (
    singleton        boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    purge_sla_hours  integer NOT NULL CHECK (purge_sla_hours BETWEEN 1 AND 8760),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
INSERT INTO siwa.report_settings (purge_sla_hours) VALUES (72);

-- ------------------------------------------------------------------ views --

-- Each whole purge's request: when the job was enqueued as one, or when a
-- sign-out became one. One row per purge job.
CREATE VIEW siwa.purge_requests AS
    SELECT seq, apple_sub, (details->>'job_id')::bigint AS job_id, details->>'event_type' AS event_type,
           (details->>'requested_at')::timestamptz AS requested_at
    FROM siwa.audit_log
    WHERE action IN ('job.enqueued', 'job.scope_widened') AND details->>'kind' = 'purge_user' AND NOT details ? 'scope';

-- One row per purge: from its request to its `job.completed`. State
-- `cancelled` for a job no longer queued and never completed (the queue
-- prunes only completed and cancelled jobs).
CREATE VIEW siwa.purge_latency AS
    SELECT r.apple_sub, r.job_id, r.event_type, r.requested_at, done.completed_at,
           extract(epoch FROM done.completed_at - r.requested_at)::double precision AS seconds,
           CASE WHEN done.completed_at IS NOT NULL THEN 'completed' ELSE coalesce(j.state, 'cancelled') END AS state
    FROM siwa.purge_requests AS r
    LEFT JOIN LATERAL (SELECT min(a.occurred_at) AS completed_at FROM siwa.audit_log AS a
                       WHERE a.apple_sub = r.apple_sub AND a.action = 'job.completed'
                         AND a.details->>'job_id' = r.job_id::text) AS done ON true
    LEFT JOIN siwa.jobs AS j ON j.id = r.job_id;

-- A user's whole story, in order: what Apple sent (never the claims, which
-- hold the email address of email events), every audit row, and each of the
-- user's jobs as it stands now (while the queue keeps it). Each part is
-- read through its index on the Apple sub.
CREATE VIEW siwa.user_history AS
    SELECT apple_sub, at, source, action, details
    FROM (
        SELECT n.apple_sub, n.received_at AS at, 'notification' AS source, n.event_type AS action,
               jsonb_build_object('notification_id', n.id, 'jti', n.jti, 'audience', n.audience,
                                  'event_time', siwa.utc_iso(to_timestamp(n.event_time / 1000.0)),
                                  'issued_at', siwa.utc_iso(n.issued_at)) AS details,
               0 AS part, n.id AS position
        FROM siwa.notifications AS n
        UNION ALL
        SELECT a.apple_sub, a.occurred_at, 'audit', a.action,
               a.details || jsonb_build_object('seq', a.seq, 'actor', a.actor), 1, a.seq
        FROM siwa.audit_log AS a
        UNION ALL
        -- Only the args that say what the job is: an operator's INSERT may put anything there.
        SELECT j.args->>'apple_sub', coalesce(j.finalized_at, j.attempted_at, j.created_at), 'job', 'job.' || j.state,
               jsonb_strip_nulls(jsonb_build_object(
                   'job_id', j.id, 'kind', j.kind, 'state', j.state, 'attempt', j.attempt, 'max_attempts', j.max_attempts,
                   'event_type', j.args->>'event_type', 'scope', j.args->>'scope', 'rerun_of', j.args->'rerun_of',
                   'created_at', siwa.utc_iso(j.created_at), 'next_run_at',
                   CASE WHEN j.state IN ('available', 'retryable') THEN siwa.utc_iso(j.run_at) END,
                   'steps_done', j.steps_done)), 2, j.id
        FROM siwa.jobs AS j
    ) AS history
    ORDER BY at, part, position;

-- Per UTC day: notifications by type (their `notification.recorded` rows),
-- refusals by reason, purges completed with their latency's median and 95th
-- percentile, purges discarded. Only days with something to count. A filter
-- on `day` reaches each part (and the BRIN index above).
CREATE VIEW siwa.daily_summary AS
    SELECT day,
           coalesce(sum(n) FILTER (WHERE part = 'notification'), 0)::bigint AS notifications,
           coalesce(jsonb_object_agg(label, n) FILTER (WHERE part = 'notification'), '{}') AS notifications_by_type,
           coalesce(sum(n) FILTER (WHERE part = 'rejection'), 0)::bigint AS rejections,
           coalesce(jsonb_object_agg(label, n) FILTER (WHERE part = 'rejection'), '{}') AS rejections_by_reason,
           count(*) FILTER (WHERE part = 'purge_completed') AS purges_completed,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds) FILTER (WHERE part = 'purge_completed') AS purge_p50_seconds,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY seconds) FILTER (WHERE part = 'purge_completed') AS purge_p95_seconds,
           coalesce(sum(n) FILTER (WHERE part = 'purge_failed'), 0)::bigint AS purges_failed
    FROM (
        SELECT 'notification' AS part, (occurred_at AT TIME ZONE 'UTC')::date AS day,
               coalesce(details->>'event_type', '?') AS label, count(*) AS n, NULL::double precision AS seconds
        FROM siwa.audit_log WHERE action = 'notification.recorded'
        GROUP BY 2, 3
        UNION ALL
        SELECT 'rejection', (received_at AT TIME ZONE 'UTC')::date, reason, sum(occurrences)::bigint, NULL
        FROM siwa.rejected_notifications
        GROUP BY 2, 3
        UNION ALL
        SELECT 'purge_completed', (c.occurred_at AT TIME ZONE 'UTC')::date, NULL, 1::bigint,
               extract(epoch FROM c.occurred_at - r.requested_at)::double precision
        FROM siwa.audit_log AS c
        JOIN siwa.purge_requests AS r ON r.apple_sub = c.apple_sub AND r.job_id = (c.details->>'job_id')::bigint
        WHERE c.action = 'job.completed'
        UNION ALL
        SELECT 'purge_failed', (d.occurred_at AT TIME ZONE 'UTC')::date, NULL, count(DISTINCT r.job_id), NULL
        FROM siwa.audit_log AS d
        JOIN siwa.purge_requests AS r ON r.apple_sub = d.apple_sub AND r.job_id = (d.details->>'job_id')::bigint
        WHERE d.action = 'job.discarded'
        GROUP BY 2
    ) AS parts
    GROUP BY day;

-- What needs someone: every discarded job (since it was discarded), and
-- every purge still pending past the SLA (since it was requested). The
-- error is the audit trail's (never the job's own, which may quote data).
CREATE VIEW siwa.attention AS
    SELECT j.id AS job_id, j.args->>'apple_sub' AS apple_sub, j.state, j.attempt,
           failure.last_error,
           CASE WHEN j.state = 'discarded' THEN coalesce(j.finalized_at, j.created_at) ELSE j.created_at END AS since
    FROM siwa.jobs AS j
    LEFT JOIN LATERAL (SELECT coalesce(a.details->>'step' || ': ', '') || coalesce(a.details->>'error', a.action) AS last_error
                       FROM siwa.audit_log AS a
                       WHERE a.apple_sub = j.args->>'apple_sub'
                         AND a.action IN ('job.retry_scheduled', 'job.discarded', 'job.rescued')
                         AND a.details->>'job_id' = j.id::text
                       ORDER BY a.seq DESC LIMIT 1) AS failure ON true
    WHERE j.state = 'discarded'
       OR (j.kind = 'purge_user' AND j.state IN ('available', 'running', 'retryable')
           AND j.created_at < now() - make_interval(hours => (SELECT purge_sla_hours FROM siwa.report_settings)));

-- ----------------------------------------------------------------- grants --

-- Auditors and admins read the answers, never the tables that hold
-- personal data (users, notifications.claims, apple_tokens, sign_in_codes):
-- the views read those as their owner, and show none of it.
GRANT SELECT ON siwa.user_history, siwa.purge_requests, siwa.purge_latency, siwa.daily_summary, siwa.attention,
                siwa.report_settings
    TO siwa_auditor, siwa_admin;

INSERT INTO siwa.runtime_grants (migration, position, why, statement) VALUES
    (10, 1, 'the admin routes and page read the audit views',
        'GRANT SELECT ON siwa.user_history, siwa.purge_requests, siwa.purge_latency, siwa.daily_summary, siwa.attention, '
        'siwa.report_settings TO %I');
