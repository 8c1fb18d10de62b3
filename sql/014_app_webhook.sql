-- The app events webhook (SIWA_APP_WEBHOOK_URL): the app's backend hears of
-- every event siwa records, in the Standard Webhooks envelope, through the
-- job queue (kind `app_event`, one job per event and delivery).
--
-- An event is an audit row: every one of them already has exactly one,
-- written in the transaction that did it (`notification.recorded`,
-- `user.signed_in`, `user.deletion_requested`, `token.invalid_grant`, and a
-- purge's `job.completed` or `job.discarded`). So an event's id is its audit
-- row's seq (webhook-id `evt_<seq>_<n>`: one row may say two things, such as
-- a consent revocation that took effect), which a retry and a replay keep;
-- the delivery is enqueued in the same transaction as the event; and
-- `siwa webhooks replay` re-reads the trail, which nothing prunes.

-- ------------------------------------------------------------ the switch --

-- Whether deliveries are enqueued. Each `siwa worker` writes it at start:
-- on with SIWA_APP_WEBHOOK_URL, off without. The worker is where the URL and
-- secret live (serve never holds them), and a flag in a table reaches every
-- writer of events: the inbox statement, siwa.sign_in, the triggers below,
-- `siwa tokens validate`, an operator's psql. Off (the default), nothing is
-- enqueued anywhere.
CREATE TABLE siwa.app_webhook (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    enabled    boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now(),
    -- The worker that wrote it last (host:pid).
    updated_by text
);
INSERT INTO siwa.app_webhook DEFAULT VALUES;

-- ---------------------------------------------------------- the mapping --

-- The app events an audit row stands for, in order (`position` 1, then 2).
-- `job_kind`: the kind of the job a `job.completed` or `job.discarded` row
-- is about (siwa.app_event_job_kind); only a purge's is an app event.
-- Apple's notifications keep Apple's type under `apple.` (unknown types too);
-- a consent revocation that set the user's status (from Apple, or a refresh
-- token Apple answered invalid_grant for) is also `consent.revoked`, whatever
-- its source, so the app has one event to sign the user out on.
--
-- Plain SQL, immutable: the planner inlines it into the statements that
-- call it (the inbox statement, the trigger, the replay).
CREATE FUNCTION siwa.app_events_of(action text, details jsonb, job_kind text)
RETURNS TABLE (event_position integer, event_type text) LANGUAGE sql IMMUTABLE AS $$
    SELECT e.event_position, e.event_type
    FROM (VALUES
        (1, CASE action
                WHEN 'notification.recorded' THEN 'apple.' || coalesce(details->>'event_type', 'unknown')
                WHEN 'user.signed_in' THEN 'user.signed_in'
                WHEN 'user.deletion_requested' THEN 'user.deletion_requested'
                WHEN 'token.invalid_grant' THEN 'token.invalid_grant'
                WHEN 'job.completed' THEN CASE WHEN job_kind = 'purge_user' THEN 'purge.completed' END
                WHEN 'job.discarded' THEN CASE WHEN job_kind = 'purge_user' THEN 'purge.failed' END
            END),
        (2, CASE WHEN (action = 'notification.recorded' AND details->>'consent_revoked' = 'true')
                   OR (action = 'token.invalid_grant' AND details->>'signed_out' = 'true')
                 THEN 'consent.revoked' END)
    ) AS e(event_position, event_type)
    WHERE e.event_type IS NOT NULL
$$;

-- A delivery job's args: the sub (the order key: a user's deliveries go out
-- one at a time, in id order), the event's type (what `siwa jobs list`
-- shows), its audit row and its id, the same for every attempt and replay.
CREATE FUNCTION siwa.app_event_args(seq bigint, sub text, event_position integer, event_type text)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('apple_sub', sub, 'event_type', event_type, 'audit_seq', seq,
                              'event_id', 'evt_' || seq || '_' || event_position)
$$;

-- When a new delivery for `sub` may first run: now, or, while an earlier
-- one of the user's is waiting to retry, its retry time (it would wait for
-- it anyway: the claim's order rule; see siwa.app_events_wait_behind).
CREATE FUNCTION siwa.app_event_run_at(sub text) RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT greatest(now(), (SELECT max(run_at) FROM siwa.jobs
                            WHERE kind = 'app_event' AND state IN ('available', 'running', 'retryable')
                              AND args->>'apple_sub' = sub))
$$;

-- The kind of job `job_id`: from the queue while it holds the job, else
-- from the job's `job.enqueued` audit row (sql/010; the queue prunes
-- finished jobs, a replay may reach further back). Deliveries have no
-- `job.enqueued` row (below), so a pruned one answers NULL: not a purge.
CREATE FUNCTION siwa.app_event_job_kind(job_id bigint, sub text, before_seq bigint) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT kind FROM siwa.jobs WHERE id = job_id),
                    (SELECT details->>'kind' FROM siwa.audit_log
                     WHERE apple_sub = sub AND action = 'job.enqueued' AND details->>'job_id' = job_id::text
                       AND seq < before_seq
                     ORDER BY seq DESC LIMIT 1))
$$;

-- --------------------------------------------------------- the payloads --

-- What the app receives for an event: its `timestamp` (Apple's event_time
-- for Apple's events, else when siwa recorded it; ISO 8601, UTC) and its
-- `data`, built from the audit row (append-only: the same for every
-- attempt) and, for Apple's events, the recorded notification. No email
-- address unless `include_email` (SIWA_APP_WEBHOOK_INCLUDE_EMAIL), and none
-- once the user's purge erased it from the notification. (`app_type`, not
-- `event_type`: in a SQL function a column of that name would win.)
CREATE FUNCTION siwa.app_event_payload(event_seq bigint, app_type text, include_email boolean,
                                       OUT occurred_at text, OUT data jsonb)
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN app_type LIKE 'apple.%' AND a.details ? 'event_time'
                THEN siwa.utc_iso(to_timestamp((a.details->>'event_time')::bigint / 1000.0))
                ELSE siwa.utc_iso(a.occurred_at) END,
           jsonb_build_object('sub', a.apple_sub) || jsonb_strip_nulls(CASE
               WHEN app_type LIKE 'apple.%' THEN jsonb_build_object(
                   'apple_type', a.details->>'event_type', 'jti', a.details->>'jti',
                   'event_time', (a.details->>'event_time')::bigint,
                   -- Apple sends it as a string or a boolean.
                   'is_private_email', CASE n.claims->'events'->>'is_private_email' WHEN 'true' THEN true
                                                                                 WHEN 'false' THEN false END,
                   'email', CASE WHEN include_email THEN n.claims->'events'->>'email' END,
                   'purge', (a.details->>'purge')::boolean,
                   'older_than_sign_in', (a.details->>'older_than_sign_in')::boolean)
               WHEN app_type = 'consent.revoked' THEN jsonb_build_object(
                   'source', CASE a.action WHEN 'token.invalid_grant' THEN 'invalid_grant' ELSE 'apple' END,
                   'purge', (a.details->>'purge')::boolean)
               WHEN app_type = 'user.signed_in' THEN jsonb_build_object(
                   'user_id', a.details->'user_id', 'is_new_user', a.details->'is_new_user',
                   'client_id', a.details->'client_id', 'refresh_token_stored', a.details->'refresh_token_stored')
               WHEN app_type = 'user.deletion_requested' THEN jsonb_build_object(
                   'user_id', a.details->'user_id', 'purge_job_id', a.details->'job_id', 'merged', a.details->'merged')
               WHEN app_type = 'token.invalid_grant' THEN jsonb_build_object(
                   'user_id', a.details->'user_id', 'client_id', a.details->'client_id',
                   'signed_out', a.details->'signed_out', 'purge', a.details->'purge')
               WHEN app_type IN ('purge.completed', 'purge.failed') THEN jsonb_build_object(
                   'job_id', (a.details->>'job_id')::bigint,
                   -- `tokens`: a sign-out (the user's Apple tokens revoked, data kept).
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
                   -- The trail's error: no server text, which may quote data.
                   'error', CASE WHEN app_type = 'purge.failed' THEN a.details->'error' END)
               ELSE '{}'::jsonb END)
    FROM siwa.audit_log AS a
    LEFT JOIN siwa.notifications AS n
           ON a.action = 'notification.recorded' AND n.id = (a.details->>'notification_id')::bigint
    WHERE a.seq = event_seq
$$;

-- ------------------------------------------------------------- the queue --

-- The claim's order rule: a delivery waits while an earlier one for the
-- same sub is pending. This index answers "is there one?" with one probe.
CREATE INDEX jobs_app_event_pending_idx ON siwa.jobs ((args->>'apple_sub'), id)
    WHERE kind = 'app_event' AND state IN ('available', 'running', 'retryable');

-- A user's later deliveries wait while an earlier one is pending; when the
-- earlier one fails, they are pushed to its retry time, so the claim's scan
-- of runnable jobs (run_at <= now()) passes them by instead of probing each:
-- with the app down for hours, every claim would otherwise read every
-- waiting delivery. The completion of a delivery lets the next ones go at
-- once (CompleteAppEventStatement). One enqueued meanwhile starts out at
-- the retry time (siwa.app_event_run_at).
CREATE FUNCTION siwa.app_events_wait_behind() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE siwa.jobs SET run_at = NEW.run_at
    WHERE kind = 'app_event' AND state IN ('available', 'retryable') AND args->>'apple_sub' = NEW.args->>'apple_sub'
      AND id > NEW.id AND run_at < NEW.run_at;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_app_events_wait_behind
    AFTER UPDATE OF state ON siwa.jobs
    FOR EACH ROW WHEN (NEW.kind = 'app_event' AND NEW.state = 'retryable' AND OLD.state = 'running')
    EXECUTE FUNCTION siwa.app_events_wait_behind();

-- A delivery is transport, not an account event: the event it carries has
-- its audit row already (its id is that row's seq), so deliveries get no
-- `job.enqueued` row each (sql/010). Their failures are audited as any job's.
DROP TRIGGER jobs_audit_enqueued ON siwa.jobs;
CREATE TRIGGER jobs_audit_enqueued
    AFTER INSERT ON siwa.jobs
    FOR EACH ROW WHEN (NEW.kind <> 'app_event')
    EXECUTE FUNCTION siwa.audit_job_enqueued();

-- Waking the workers for deliveries: not one NOTIFY per insert (sql/002's
-- trigger). PostgreSQL serializes the commits of all transactions that
-- NOTIFY (each holds a global lock from before its commit record until it
-- is flushed), so a NOTIFY in every transaction that records a notification
-- would undo group commit (pgbench's one-notification transactions fell
-- from 2,626/s to 210/s). Whoever enqueues deliveries NOTIFYs only when no
-- delivery was waiting to run: a worker that has one to run, or is running
-- one, claims again when it is done (and polls).
DROP TRIGGER jobs_wake_workers_on_insert ON siwa.jobs;
CREATE TRIGGER jobs_wake_workers_on_insert
    AFTER INSERT ON siwa.jobs
    FOR EACH ROW WHEN (NEW.state IN ('available', 'retryable') AND NEW.kind <> 'app_event')
    EXECUTE FUNCTION siwa.wake_workers();

-- No delivery is waiting to run (seen from the caller's snapshot): the
-- workers may be asleep, and the caller's new ones should wake them.
CREATE FUNCTION siwa.app_events_idle() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT NOT EXISTS (SELECT FROM siwa.jobs WHERE kind = 'app_event' AND state = 'available' AND run_at <= now())
$$;

-- The events recorded outside the inbox statement (which enqueues its own,
-- in one set with the batch): a row trigger on the audit log, so every
-- writer of these rows enqueues, whoever it is (siwa.sign_in, in-app
-- deletion, token validation, any statement that completes or discards a
-- purge). WHEN keeps every other audit row free of it.
CREATE FUNCTION siwa.enqueue_app_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    idle boolean;
BEGIN
    IF NOT coalesce((SELECT enabled FROM siwa.app_webhook), false) THEN
        RETURN NULL;
    END IF;
    idle := siwa.app_events_idle();
    INSERT INTO siwa.jobs (kind, args, run_at)
    SELECT 'app_event', siwa.app_event_args(NEW.seq, NEW.apple_sub, e.event_position, e.event_type),
           siwa.app_event_run_at(NEW.apple_sub)
    FROM siwa.app_events_of(NEW.action, NEW.details,
                            CASE WHEN NEW.action LIKE 'job.%'
                                 THEN siwa.app_event_job_kind((NEW.details->>'job_id')::bigint, NEW.apple_sub, NEW.seq) END) AS e
    ORDER BY e.event_position;
    IF FOUND AND idle THEN
        PERFORM pg_notify('siwa_jobs', 'app_event');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER audit_log_app_events
    AFTER INSERT ON siwa.audit_log
    FOR EACH ROW WHEN (NEW.action IN ('user.signed_in', 'user.deletion_requested', 'token.invalid_grant',
                                      'job.completed', 'job.discarded'))
    EXECUTE FUNCTION siwa.enqueue_app_events();

REVOKE ALL ON FUNCTION siwa.app_events_of(text, jsonb, text), siwa.app_event_args(bigint, text, integer, text),
                       siwa.app_event_run_at(text), siwa.app_event_job_kind(bigint, text, bigint), siwa.app_event_payload(bigint, text, boolean),
                       siwa.enqueue_app_events(), siwa.app_events_wait_behind(), siwa.app_events_idle()
    FROM PUBLIC;

-- ----------------------------------------------------------------- grants --

-- `siwa webhooks replay` (an admin's role) reads the trail and the switch
-- and enqueues with the mapping; its audit row is the admin's, as for
-- `siwa jobs retry`. Whoever writes the rows above runs the trigger.
GRANT SELECT ON siwa.app_webhook TO siwa_admin;
GRANT EXECUTE ON FUNCTION siwa.app_events_of(text, jsonb, text), siwa.app_event_args(bigint, text, integer, text),
                          siwa.app_event_run_at(text), siwa.app_event_job_kind(bigint, text, bigint), siwa.enqueue_app_events(),
                          siwa.app_events_idle()
    TO siwa_admin;

INSERT INTO siwa.runtime_grants (migration, position, why, statement) VALUES
    (14, 1, 'the worker turns the app webhook on or off at start; every writer of events reads it',
        'GRANT SELECT, UPDATE ON siwa.app_webhook TO %I'),
    (14, 2, 'the inbox statement and the audit trigger map events to deliveries',
        'GRANT EXECUTE ON FUNCTION siwa.app_events_of(text, jsonb, text), siwa.app_event_args(bigint, text, integer, text), '
        'siwa.app_event_run_at(text), siwa.app_event_job_kind(bigint, text, bigint), siwa.enqueue_app_events(), '
        'siwa.app_events_idle() TO %I'),
    (14, 3, 'the worker builds each delivery''s body',
        'GRANT EXECUTE ON FUNCTION siwa.app_event_payload(bigint, text, boolean) TO %I');
