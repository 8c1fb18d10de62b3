-- Admins write only through functions, the audit trail stamps itself, and a
-- purge completes only with the steps the trail shows (issue 19, §4).
--
-- Until now siwa_admin held INSERT/UPDATE on siwa.jobs, INSERT on
-- siwa.audit_log and INSERT/UPDATE on siwa.api_keys: an admin could mark a
-- pending purge's steps done (and have the worker sign a receipt for an
-- erasure that never ran), move a purge to another sub, forge any audit row
-- with its own seq and time, or mint a key with no audit row. Now every
-- admin write is a SECURITY DEFINER function below (owned by the schema's
-- owner, search_path fixed, every name qualified, EXECUTE only to who needs
-- it) that checks the change, makes it, and writes its audit row in the
-- same statement; siwa_admin keeps SELECT and nothing else on the tables.

-- ------------------------------------------------------------ the stamp --

-- The database role that wrote the row (session_user: what the login was,
-- which neither SET ROLE nor a SECURITY DEFINER function changes). NULL
-- only on rows written before this migration (siwa.audit_stamping).
ALTER TABLE siwa.audit_log ADD COLUMN db_user text;

-- seq, occurred_at and db_user are the database's to say, whatever the
-- inserter wrote. The seq is still drawn after the transaction id
-- (siwa.next_audit_seq, sql/009: the sealer depends on it), now here rather
-- than in the column's default, which an inserter could override.
CREATE FUNCTION siwa.stamp_audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.seq := siwa.next_audit_seq();
    NEW.occurred_at := pg_catalog.now();
    NEW.db_user := session_user;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION siwa.stamp_audit_row() FROM PUBLIC;
-- Without the default a seq is drawn once per row (the trigger's), not twice.
ALTER TABLE siwa.audit_log ALTER COLUMN seq DROP DEFAULT;
CREATE TRIGGER audit_log_stamp
    BEFORE INSERT ON siwa.audit_log
    FOR EACH ROW EXECUTE FUNCTION siwa.stamp_audit_row();

-- Where stamped rows begin: a row below first_seq was written before this
-- migration, so its NULL db_user is history, not a row written with the
-- trigger off.
CREATE TABLE siwa.audit_stamping (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    first_seq bigint NOT NULL
);
INSERT INTO siwa.audit_stamping (first_seq)
SELECT greatest(coalesce(pg_sequence_last_value('siwa.audit_log_seq'), 0), coalesce(max(seq), 0)) + 1 FROM siwa.audit_log;
GRANT SELECT ON siwa.audit_stamping TO siwa_admin, siwa_auditor;

-- ---------------------------------------------- steps the trail shows --

-- The steps among `steps` that have no `job.step_completed` row for the
-- job written by a worker's role: the calling session's (the one that ran
-- them), or another role that may record steps (UPDATE of steps_done) and
-- is not the owner (a worker whose role changed, siwa_app to siwa_worker,
-- between a step and the completion); or written before stamping began. A
-- step only the job row claims (steps_done written by hand by the owner)
-- is one of them.
CREATE FUNCTION siwa.steps_without_evidence(evidence_job bigint, evidence_sub text, steps text[]) RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(claimed.step ORDER BY claimed.step), '{}')
    FROM unnest(steps) AS claimed(step)
    WHERE NOT EXISTS (
        SELECT FROM siwa.audit_log AS a
        WHERE a.apple_sub = evidence_sub AND a.action = 'job.step_completed' AND a.actor = 'worker'
          AND a.details->>'job_id' = evidence_job::text AND a.details->>'step' = claimed.step
          AND (a.db_user = session_user::text
               OR (a.db_user IS NULL AND a.seq < (SELECT s.first_seq FROM siwa.audit_stamping AS s))
               OR EXISTS (SELECT FROM pg_catalog.pg_roles AS r
                          WHERE r.rolname = a.db_user AND NOT r.rolsuper
                            AND pg_catalog.has_column_privilege(r.oid, 'siwa.jobs'::regclass, 'steps_done', 'UPDATE')
                            AND NOT pg_catalog.pg_has_role(r.oid, (SELECT c.relowner FROM pg_catalog.pg_class AS c
                                                                  WHERE c.oid = 'siwa.jobs'::regclass), 'USAGE'))))
$$;
REVOKE ALL ON FUNCTION siwa.steps_without_evidence(bigint, text, text[]) FROM PUBLIC;

-- A purge completes only if every step it recorded before this update has
-- its evidence (the step this very update records writes its own row in
-- the same statement). Otherwise the statement fails with SQLSTATE SW001
-- and the steps, as JSON, in DETAIL: the worker then discards the job with
-- a `job.completion_refused` audit row (JobQueue.fail), signs no receipt,
-- and the discarded purge alerts as any other (siwa.attention,
-- SiwaPurgeDiscarded).
CREATE FUNCTION siwa.check_purge_completion() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    missing text[];
BEGIN
    missing := siwa.steps_without_evidence(NEW.id, NEW.args->>'apple_sub', ARRAY(SELECT jsonb_object_keys(OLD.steps_done)));
    IF cardinality(missing) > 0 THEN
        -- The names as the audit row will show them: a forged key may be anything.
        missing := ARRAY(SELECT left(m, 100) FROM unnest(missing) AS m LIMIT 20);
        RAISE EXCEPTION 'purge job % claims steps done that the audit trail does not show: %',
                        NEW.id, array_to_string(missing, ', ')
            USING ERRCODE = 'SW001', DETAIL = to_jsonb(missing)::text;
    END IF;
    RETURN NEW;
END $$;
REVOKE ALL ON FUNCTION siwa.check_purge_completion() FROM PUBLIC;
CREATE TRIGGER jobs_check_purge_completion
    BEFORE UPDATE OF state ON siwa.jobs
    -- A job with no step recorded before (most of a batch's) has nothing to check.
    FOR EACH ROW WHEN (NEW.state = 'completed' AND OLD.state IS DISTINCT FROM 'completed' AND NEW.kind = 'purge_user'
                       AND OLD.steps_done <> '{}'::jsonb)
    EXECUTE FUNCTION siwa.check_purge_completion();

-- -------------------------------------------------------- job changes --

-- retry | cancel | run_now of job `target_job`, audited as `job.<change>`
-- with actor `acting` and `acting_details` (who, beyond db_user). Refused
-- with a one-line reason (no_data_found: no such job;
-- object_not_in_prerequisite_state: not from this state), writing nothing.
-- Not callable by anyone but the owner: the two functions after it are
-- the doors.
CREATE FUNCTION siwa.change_job_as(job_change text, target_job bigint, acting text, acting_details jsonb) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    allowed text[] := CASE job_change WHEN 'retry' THEN ARRAY['discarded', 'cancelled', 'retryable', 'available']
                                      WHEN 'cancel' THEN ARRAY['available', 'retryable']
                                      WHEN 'run_now' THEN ARRAY['available', 'retryable'] END;
    job siwa.jobs;
    audit_seq bigint;
BEGIN
    IF allowed IS NULL THEN
        RAISE EXCEPTION 'unknown job change %', quote_literal(job_change) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO job FROM siwa.jobs AS j WHERE j.id = target_job FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no job with id %', target_job USING ERRCODE = 'no_data_found';
    END IF;
    IF NOT job.state = ANY(allowed) THEN
        RAISE EXCEPTION 'job % is %; only a job that is % can be changed this way', target_job, job.state,
                        array_to_string(allowed, ', ')
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF job_change = 'run_now' AND job.run_at <= now() THEN
        RAISE EXCEPTION 'job % is due already (since %): the next free worker runs it', target_job,
                        to_char(job.run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF job_change = 'retry' THEN
        -- A job that used up its attempts gets one more (as River does).
        UPDATE siwa.jobs AS j SET state = 'available', run_at = now(), finalized_at = NULL,
                                  max_attempts = greatest(j.max_attempts, j.attempt + 1)
        WHERE j.id = target_job RETURNING j.* INTO job;
    ELSIF job_change = 'cancel' THEN
        UPDATE siwa.jobs AS j SET state = 'cancelled', finalized_at = now() WHERE j.id = target_job RETURNING j.* INTO job;
    ELSE
        -- A consent revocation's purge waiting out its grace delay
        -- (args.purge_after, sql/015) stops waiting, or it would only wait
        -- again (its wait's end is audited as job.wait_ended).
        UPDATE siwa.jobs AS j SET run_at = now(), args = j.args - 'purge_after' WHERE j.id = target_job RETURNING j.* INTO job;
        -- The state did not change, so sql/002's trigger does not wake the workers.
        PERFORM pg_notify('siwa_jobs', job.kind);
    END IF;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES (acting, 'job.' || job_change, job.args->>'apple_sub',
            jsonb_build_object('job_id', job.id, 'new_state', job.state, 'db_user', session_user::text) || acting_details)
    RETURNING seq INTO audit_seq;
    RETURN audit_seq;
END $$;
REVOKE ALL ON FUNCTION siwa.change_job_as(text, bigint, text, jsonb) FROM PUBLIC;

-- `siwa jobs retry|cancel|run-now` as an admin's own role (a member of
-- siwa_admin): actor `admin`, details `admin` (the role, as older rows
-- name it) and `login_hint` (the caller's login name: a hint only).
CREATE FUNCTION siwa.change_job(job_change text, target_job bigint, login_hint text) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT siwa.change_job_as(job_change, target_job, 'admin',
                              jsonb_build_object('admin', session_user::text, 'login_hint', left(login_hint, 64)))
$$;
REVOKE ALL ON FUNCTION siwa.change_job(text, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.change_job(text, bigint, text) TO siwa_admin;

-- The admin listener (in siwa serve, as the runtime role) for the admin
-- key `acting_key`: actor `admin_key:NAME`, with the key's name and id.
-- The name is read here, and only a live admin key may act.
CREATE FUNCTION siwa.change_job_by_key(job_change text, target_job bigint, acting_key bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    key_name text;
BEGIN
    SELECT k.name INTO key_name FROM siwa.api_keys AS k
    WHERE k.id = acting_key AND k.scope = 'admin' AND k.revoked_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'API key % is not a live admin key', acting_key USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN siwa.change_job_as(job_change, target_job, 'admin_key:' || key_name,
                              jsonb_build_object('api_key', key_name, 'api_key_id', acting_key, 'via', 'admin_http'));
END $$;
REVOKE ALL ON FUNCTION siwa.change_job_by_key(text, bigint, bigint) FROM PUBLIC;

-- An erasure asked for outside Apple and the app (a person's email, a
-- regulator): a purge of `target_sub`, or the pending one it joins, as
-- sql/008's siwa.enqueue_purge does for siwa's own requests. Replaces the
-- plain INSERT INTO siwa.jobs admins were told to use.
CREATE FUNCTION siwa.request_purge(target_sub text, login_hint text, OUT job_id bigint, OUT merged boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    queued record;
BEGIN
    IF target_sub IS NULL OR target_sub !~ '^[[:graph:]]{1,255}$' THEN
        RAISE EXCEPTION 'an Apple sub is 1 to 255 printable characters without spaces' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO queued FROM siwa.enqueue_purge(target_sub, NULL, NULL, false, false, '{}');
    job_id := queued.job_id;
    merged := NOT queued.inserted;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('admin', 'purge.requested', target_sub,
            jsonb_build_object('job_id', job_id, 'merged', merged, 'db_user', session_user::text,
                               'admin', session_user::text, 'login_hint', left(login_hint, 64)));
END $$;
REVOKE ALL ON FUNCTION siwa.request_purge(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.request_purge(text, text) TO siwa_admin;

-- ----------------------------------------------------------- API keys --

-- `siwa api-keys create`: siwa makes the key and passes only its prefix and
-- the SHA-256 of its secret; the audit row names the caller, the key's
-- name, prefix and scope, never the hash. Both functions answer the key's
-- row without its hash (which siwa_admin may not read).
CREATE FUNCTION siwa.create_api_key(key_name text, key_prefix text, key_secret_sha256 bytea, key_scope text, login_hint text)
RETURNS TABLE (id bigint, name text, prefix text, scope text, created_at timestamptz, created_by text,
               revoked_at timestamptz, revoked_by text, last_used_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    made siwa.api_keys;
BEGIN
    IF octet_length(key_secret_sha256) IS DISTINCT FROM 32 THEN
        RAISE EXCEPTION 'the key''s secret_sha256 must be 32 bytes (a SHA-256)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF key_prefix IS NULL OR key_prefix !~ '^[a-z2-7]{12}$' THEN
        RAISE EXCEPTION 'a key prefix is 12 characters of lowercase base32' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO siwa.api_keys AS k (name, prefix, secret_sha256, scope, created_by)
    VALUES (key_name, key_prefix, key_secret_sha256, key_scope, session_user)
    RETURNING k.* INTO made;
    INSERT INTO siwa.audit_log (actor, action, details)
    VALUES ('admin', 'api_key.created',
            jsonb_build_object('name', made.name, 'key_id', made.id, 'prefix', made.prefix, 'scope', made.scope,
                               'db_user', session_user::text, 'login_hint', left(login_hint, 64)));
    RETURN QUERY SELECT made.id, made.name, made.prefix, made.scope, made.created_at, made.created_by,
                        made.revoked_at, made.revoked_by, made.last_used_at;
END $$;
REVOKE ALL ON FUNCTION siwa.create_api_key(text, text, bytea, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.create_api_key(text, text, bytea, text, text) TO siwa_admin;

-- `siwa api-keys revoke`: the live key named `key_name` stops working (the
-- change is announced to every serve, sql/013).
CREATE FUNCTION siwa.revoke_api_key(key_name text, login_hint text)
RETURNS TABLE (id bigint, name text, prefix text, scope text, created_at timestamptz, created_by text,
               revoked_at timestamptz, revoked_by text, last_used_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    revoked siwa.api_keys;
BEGIN
    UPDATE siwa.api_keys AS k SET revoked_at = now(), revoked_by = session_user
    WHERE k.name = key_name AND k.revoked_at IS NULL
    RETURNING k.* INTO revoked;
    IF NOT FOUND THEN
        IF EXISTS (SELECT FROM siwa.api_keys AS k WHERE k.name = key_name) THEN
            RAISE EXCEPTION 'the API key named ''%'' is already revoked', key_name USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        RAISE EXCEPTION 'no API key named ''%'' (siwa api-keys list shows them)', key_name USING ERRCODE = 'no_data_found';
    END IF;
    INSERT INTO siwa.audit_log (actor, action, details)
    VALUES ('admin', 'api_key.revoked',
            jsonb_build_object('name', revoked.name, 'key_id', revoked.id, 'prefix', revoked.prefix, 'scope', revoked.scope,
                               'db_user', session_user::text, 'login_hint', left(login_hint, 64)));
    RETURN QUERY SELECT revoked.id, revoked.name, revoked.prefix, revoked.scope, revoked.created_at, revoked.created_by,
                        revoked.revoked_at, revoked.revoked_by, revoked.last_used_at;
END $$;
REVOKE ALL ON FUNCTION siwa.revoke_api_key(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.revoke_api_key(text, text) TO siwa_admin;

-- ----------------------------------------------------- webhook replay --

-- `siwa webhooks replay` (AppEventReplay.swift): the deliveries of the
-- events recorded since `replay_since` (of `replay_sub` only, when given),
-- at most `replay_limit`, enqueued again unless still pending, with the
-- admin's audit row. `webhook_enabled` false: the webhook is off and
-- nothing was written. `last_occurred`/`events_found`: where to go on from
-- when there were more than the limit.
CREATE FUNCTION siwa.replay_app_events(replay_since timestamptz, replay_sub text, replay_limit integer, login_hint text,
    OUT webhook_enabled boolean, OUT enqueued bigint, OUT already_pending bigint, OUT last_occurred text,
    OUT events_found bigint, OUT woken bigint)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH switch AS (
        SELECT w.enabled FROM siwa.app_webhook AS w
    ), events AS MATERIALIZED (
        SELECT a.seq, a.apple_sub, a.occurred_at, e.event_position, e.event_type
        FROM siwa.audit_log AS a,
             LATERAL siwa.app_events_of(a.action, a.details,
                 CASE WHEN a.action LIKE 'job.%'
                      THEN siwa.app_event_job_kind((a.details->>'job_id')::bigint, a.apple_sub, a.seq) END) AS e
        WHERE a.action IN ('notification.recorded', 'user.signed_in', 'user.deletion_requested', 'token.invalid_grant',
                           'purge.cancelled', 'job.completed', 'job.discarded')
          AND a.occurred_at >= replay_since
          -- the day index (sql/010) for a range, the sub's for a user
          AND (a.occurred_at AT TIME ZONE 'UTC')::date >= (replay_since AT TIME ZONE 'UTC')::date
          AND (replay_sub IS NULL OR a.apple_sub = replay_sub)
          AND (SELECT enabled FROM switch)
        ORDER BY a.seq, e.event_position
        LIMIT replay_limit + 1
    ), chosen AS (
        SELECT * FROM events ORDER BY seq, event_position LIMIT replay_limit
    ), fresh AS (
        SELECT chosen.* FROM chosen
        WHERE NOT EXISTS (SELECT FROM siwa.jobs AS j
                          WHERE j.kind = 'app_event' AND j.state IN ('available', 'running', 'retryable')
                            AND j.args->>'apple_sub' = chosen.apple_sub
                            AND j.args->>'event_id' = 'evt_' || chosen.seq || '_' || chosen.event_position)
    ), queued AS (
        INSERT INTO siwa.jobs (kind, args, run_at)
        SELECT 'app_event', siwa.app_event_args(fresh.seq, fresh.apple_sub, fresh.event_position, fresh.event_type),
               siwa.app_event_run_at(fresh.apple_sub)
        FROM fresh ORDER BY fresh.seq, fresh.event_position
        RETURNING id
    ), audit AS (
        INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
        SELECT 'admin', 'app_events.replayed', replay_sub,
               jsonb_build_object('since', siwa.utc_iso(replay_since), 'enqueued', (SELECT count(*) FROM queued),
                                  'already_pending', (SELECT count(*) FROM chosen) - (SELECT count(*) FROM fresh),
                                  'db_user', session_user::text, 'login_hint', left(login_hint, 64))
        WHERE (SELECT enabled FROM switch)
    ), wake AS (
        SELECT pg_notify('siwa_jobs', 'app_event') WHERE EXISTS (SELECT FROM queued)
    )
    SELECT (SELECT enabled FROM switch), (SELECT count(*) FROM queued)::bigint,
           ((SELECT count(*) FROM chosen) - (SELECT count(*) FROM fresh))::bigint,
           (SELECT siwa.utc_iso(events.occurred_at) FROM events ORDER BY events.seq DESC, events.event_position DESC OFFSET 0 LIMIT 1),
           (SELECT count(*) FROM events)::bigint, (SELECT count(*) FROM wake)::bigint
$$;
REVOKE ALL ON FUNCTION siwa.replay_app_events(timestamptz, text, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.replay_app_events(timestamptz, text, integer, text) TO siwa_admin;

-- ------------------------------------------------------------- grants --

-- siwa_admin reads; every change it makes is one of the functions above.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON ALL TABLES IN SCHEMA siwa FROM siwa_admin;
REVOKE USAGE, UPDATE ON ALL SEQUENCES IN SCHEMA siwa FROM siwa_admin;
-- The replay's mapping is the function's business now (sql/014 granted it for the plain SQL).
REVOKE EXECUTE ON FUNCTION siwa.app_events_of(text, jsonb, text), siwa.app_event_args(bigint, text, integer, text),
                           siwa.app_event_run_at(text), siwa.app_event_job_kind(bigint, text, bigint), siwa.enqueue_app_events(),
                           siwa.app_events_idle()
    FROM siwa_admin;

INSERT INTO siwa.runtime_grants (migration, position, why, statement) VALUES
    (17, 1, 'serve: the admin listener retries, cancels and runs jobs now for an admin key (POST /admin/jobs/{id}/...)',
        'GRANT EXECUTE ON FUNCTION siwa.change_job_by_key(text, bigint, bigint) TO %I'),
    (17, 2, 'worker: a deletion receipt lists only the steps whose job.step_completed rows the worker wrote',
        'GRANT EXECUTE ON FUNCTION siwa.steps_without_evidence(bigint, text, text[]) TO %I');
