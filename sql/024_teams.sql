-- Several apps and teams on one siwa (issue 21, §3). Apple calls `sub`
-- "The team-scoped user identifier that Apple provides"
-- (docs/apple-sources.md §8d): the same string under two teams is two
-- people. So a user is keyed by (team, sub), and every place that finds a
-- user by sub finds them by both.
--
-- * siwa.users gains `apple_team` (the team the user's sub belongs to; none
--   only for a user imported by `siwa transfer import` and awaiting its sub)
--   and `client_id` (the client id, Apple's `aud`, of the user's latest
--   sign-in or Apple event). (apple_sub, apple_team) is unique; a sub alone
--   is not.
-- * siwa.notifications, siwa.deletion_receipts and siwa.user_moves carry
--   the team beside the sub; the audit trail's rows about a user carry it
--   in a column of their own (`apple_team`, hashed by the chain's version 3,
--   AuditChain.swift), which every row naming a sub must fill.
-- * A job about a user carries `apple_team` beside `apple_sub` in its args
--   (purge_user, app_event, transfer_*); the one pending purge is per
--   (sub, team).
-- * The functions that took a sub take its team too.
--
-- Existing rows belong to the one team siwa served before this migration:
-- `siwa migrate` passes it (SIWA_APPLE_TEAM_ID, or the only team of
-- SIWA_APPLE_CLIENTS_FILE) as the session setting siwa.existing_rows_team.
-- Without it, a database that holds users is refused, writing nothing. The
-- columns take it as a default first (no table rewrite), then lose the
-- default: a writer that forgets the team fails instead of guessing.

-- ------------------------------------------------------------ the columns --

DO $$
DECLARE
    team text := nullif(current_setting('siwa.existing_rows_team', true), '');
BEGIN
    IF team IS NOT NULL AND team !~ '^[A-Z0-9]{10}$' THEN
        RAISE EXCEPTION 'siwa.existing_rows_team: a team id is 10 upper-case letters and digits, got %', quote_literal(left(team, 40))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF team IS NULL AND (EXISTS (SELECT FROM siwa.users) OR EXISTS (SELECT FROM siwa.notifications)
                         OR EXISTS (SELECT FROM siwa.jobs WHERE args ? 'apple_sub')
                         OR EXISTS (SELECT FROM siwa.deletion_receipts) OR EXISTS (SELECT FROM siwa.user_moves)) THEN
        RAISE EXCEPTION 'this database holds users, and siwa now keys them by team and sub: run siwa migrate with SIWA_APPLE_TEAM_ID set to the team they belong to (or a SIWA_APPLE_CLIENTS_FILE naming one team)'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    EXECUTE format('ALTER TABLE siwa.users ADD COLUMN apple_team text DEFAULT %L', team);
    EXECUTE format('ALTER TABLE siwa.notifications ADD COLUMN apple_team text DEFAULT %L', team);
    EXECUTE format('ALTER TABLE siwa.deletion_receipts ADD COLUMN apple_team text DEFAULT %L', team);
    EXECUTE format('ALTER TABLE siwa.user_moves ADD COLUMN old_team text DEFAULT %L, ADD COLUMN new_team text DEFAULT %L', team, team);
    -- The jobs that name a user (few: the queue prunes finished ones). Their
    -- triggers audit changes of state and args, which this is neither.
    ALTER TABLE siwa.jobs DISABLE TRIGGER USER;
    UPDATE siwa.jobs SET args = args || jsonb_build_object('apple_team', team)
    WHERE args ? 'apple_sub' AND args->>'apple_sub' IS NOT NULL AND NOT args ? 'apple_team';
    ALTER TABLE siwa.jobs ENABLE TRIGGER USER;
END $$;

ALTER TABLE siwa.users ALTER COLUMN apple_team DROP DEFAULT;
ALTER TABLE siwa.notifications ALTER COLUMN apple_team DROP DEFAULT;
ALTER TABLE siwa.deletion_receipts ALTER COLUMN apple_team DROP DEFAULT;
ALTER TABLE siwa.user_moves ALTER COLUMN old_team DROP DEFAULT, ALTER COLUMN new_team DROP DEFAULT;

-- An imported user awaiting its sub has no team yet either.
UPDATE siwa.users SET apple_team = NULL WHERE apple_sub IS NULL AND apple_team IS NOT NULL;

ALTER TABLE siwa.users
    ADD COLUMN client_id text,
    ADD CONSTRAINT users_team_with_sub CHECK ((apple_sub IS NULL) = (apple_team IS NULL)),
    ADD CONSTRAINT users_team_shape CHECK (apple_team ~ '^[A-Z0-9]{10}$'),
    DROP CONSTRAINT users_apple_sub_key;
-- The sub first: it answers a lookup by sub alone too (an admin's, which
-- then says which teams have it).
CREATE UNIQUE INDEX users_sub_team_key ON siwa.users (apple_sub, apple_team);

ALTER TABLE siwa.user_moves DROP CONSTRAINT user_moves_pkey,
    ALTER COLUMN old_team SET NOT NULL, ALTER COLUMN new_team SET NOT NULL,
    ADD PRIMARY KEY (old_sub, old_team);

-- Rows written before stay as they were (the chain has hashed them): NULL.
ALTER TABLE siwa.audit_log ADD COLUMN apple_team text;

DROP INDEX siwa.jobs_one_pending_purge_idx;
CREATE UNIQUE INDEX jobs_one_pending_purge_idx ON siwa.jobs (kind, (args->>'apple_sub'), (args->>'apple_team'))
    WHERE kind = 'purge_user' AND state IN ('available', 'running', 'retryable');

-- seq, occurred_at and db_user stamped as before (sql/017); and a row that
-- names a sub must name its team, or it would not say whose it is.
CREATE OR REPLACE FUNCTION siwa.stamp_audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.apple_sub IS NOT NULL AND NEW.apple_team IS NULL THEN
        RAISE EXCEPTION 'siwa.audit_log: a row naming a sub names its team (apple_team), action %', NEW.action
            USING ERRCODE = 'not_null_violation';
    END IF;
    NEW.seq := siwa.next_audit_seq();
    NEW.occurred_at := pg_catalog.now();
    NEW.db_user := session_user;
    RETURN NEW;
END $$;

-- ------------------------------------------------------- purge requests --

-- As sql/015's, keyed by (sub, team).
DROP FUNCTION siwa.enqueue_purge(text, text, text, boolean, boolean, jsonb);
CREATE FUNCTION siwa.enqueue_purge(sub text, team text, event_type text, jti text, tokens_only boolean, renotify boolean,
    extra jsonb DEFAULT '{}', OUT job_id bigint, OUT job_state text, OUT inserted boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    request jsonb := jsonb_build_object('apple_sub', sub, 'apple_team', team, 'event_type', event_type)
                     || jsonb_strip_nulls(jsonb_build_object('jti', jti)) || extra;
BEGIN
    IF team IS NULL THEN
        RAISE EXCEPTION 'siwa.enqueue_purge: the sub''s team is required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF jsonb_typeof(extra) IS DISTINCT FROM 'object' OR EXISTS (
        SELECT FROM jsonb_object_keys(extra) AS k
        WHERE k NOT IN ('purge_after', 'api_key', 'after_cancelled_job_id', 'ledger_job_id')) THEN
        RAISE EXCEPTION 'siwa.enqueue_purge: extra may hold purge_after, api_key, after_cancelled_job_id, ledger_job_id only'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF tokens_only THEN
        PERFORM FROM siwa.users AS u JOIN siwa.apple_tokens AS t ON t.user_id = u.id
        WHERE u.apple_sub = sub AND u.apple_team = team LIMIT 1;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        request := request || jsonb_build_object('scope', 'tokens', 'tokens_before', clock_timestamp());
    END IF;
    INSERT INTO siwa.jobs AS j (kind, args) VALUES ('purge_user', request)
    ON CONFLICT (kind, (args->>'apple_sub'), (args->>'apple_team'))
        WHERE kind = 'purge_user' AND state IN ('available', 'running', 'retryable')
    DO UPDATE SET args = CASE
        -- A purge due now into one still waiting: the wait ends.
        WHEN siwa.purge_waiting(j.args) AND NOT excluded.args ? 'scope' AND NOT excluded.args ? 'purge_after'
        THEN (j.args - 'purge_after' - 'jti') || jsonb_build_object('event_type', excluded.args->>'event_type')
             || jsonb_strip_nulls(jsonb_build_object('jti', excluded.args->>'jti'))
             || (excluded.args - 'apple_sub' - 'apple_team' - 'event_type' - 'jti')
        -- A grace purge into a waiting one (a second revocation): covered.
        WHEN excluded.args ? 'purge_after' AND siwa.purge_waiting(j.args) THEN j.args
        WHEN excluded.args ? 'scope' AND NOT j.args ? 'scope' THEN j.args
        WHEN excluded.args ? 'scope' AND j.state <> 'running' AND j.steps_done = '{}'::jsonb
        THEN (j.args - 'jti') || excluded.args
        WHEN excluded.args ? 'scope' THEN
            CASE WHEN j.args ? 'rerun' THEN j.args
                 ELSE j.args || jsonb_build_object('rerun_tokens', excluded.args - 'apple_sub' - 'apple_team' - 'scope') END
        WHEN j.args ? 'scope' AND j.state <> 'running' AND j.steps_done = '{}'::jsonb
        THEN (j.args - 'scope' - 'tokens_before' - 'jti' - 'rerun_tokens') || excluded.args
        -- (a purge marked to follow a running sign-out keeps its grace delay)
        WHEN j.args ? 'scope' THEN
            j.args || jsonb_build_object('rerun', jsonb_build_object('event_type', excluded.args->>'event_type',
                                                                     'jti', excluded.args->>'jti')
                                                  || jsonb_strip_nulls(jsonb_build_object('purge_after', excluded.args->'purge_after')))
        WHEN NOT renotify THEN j.args
        WHEN j.state = 'running' OR j.steps_done <> '{}'::jsonb THEN
            j.args || jsonb_build_object('rerun', jsonb_build_object('event_type', excluded.args->>'event_type',
                                                                     'jti', excluded.args->>'jti'))
        ELSE j.args || jsonb_build_object('event_type', excluded.args->>'event_type', 'jti', excluded.args->>'jti')
        END,
        run_at = CASE WHEN siwa.purge_waiting(j.args) AND NOT excluded.args ? 'scope' AND NOT excluded.args ? 'purge_after'
                           AND j.state <> 'running'
                      THEN now() ELSE j.run_at END
    RETURNING j.id, j.state, j.xmax = 0 INTO job_id, job_state, inserted;
END $$;
REVOKE ALL ON FUNCTION siwa.enqueue_purge(text, text, text, text, boolean, boolean, jsonb) FROM PUBLIC;

-- The purge marked to follow a running sign-out keeps its delay (sql/015).
CREATE OR REPLACE FUNCTION siwa.enqueue_purge_rerun() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rerun_id bigint;
BEGIN
    INSERT INTO siwa.jobs (kind, args)
    VALUES (NEW.kind, jsonb_build_object('apple_sub', NEW.args->>'apple_sub', 'apple_team', NEW.args->>'apple_team',
                                         'event_type', NEW.args->'rerun'->>'event_type',
                                         'jti', NEW.args->'rerun'->>'jti', 'rerun_of', NEW.id)
                      || jsonb_strip_nulls(jsonb_build_object('purge_after', NEW.args->'rerun'->'purge_after')))
    ON CONFLICT DO NOTHING
    RETURNING id INTO rerun_id;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES ('worker', 'job.rerun_enqueued', NEW.args->>'apple_sub', NEW.args->>'apple_team',
            jsonb_build_object('job_id', rerun_id, 'after_job_id', NEW.id));
    RETURN NULL;
END $$;

-- As sql/015's, for the user (sub, team).
DROP FUNCTION siwa.cancel_grace_purge(text, text);
CREATE FUNCTION siwa.cancel_grace_purge(sub text, team text, api_key text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    waiting record;
BEGIN
    SELECT j.id, j.state, j.args, j.steps_done INTO waiting
    FROM siwa.jobs AS j
    WHERE j.kind = 'purge_user' AND j.args->>'apple_sub' = sub AND j.args->>'apple_team' = team
      AND j.state IN ('available', 'running', 'retryable') AND j.args ? 'purge_after'
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'none';
    END IF;
    IF waiting.state = 'running' OR NOT siwa.purge_waiting(waiting.args) THEN
        RETURN 'underway';
    END IF;
    UPDATE siwa.jobs SET state = 'cancelled', finalized_at = now(), locked_by = NULL, locked_until = NULL
    WHERE id = waiting.id;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES ('api', 'purge.cancelled', sub, team,
            jsonb_build_object('job_id', waiting.id, 'reason', 'signed_in_again', 'api_key', api_key,
                               'purge_after', waiting.args->>'purge_after'));
    IF NOT waiting.steps_done ? 'apple.revoke_tokens' THEN
        PERFORM siwa.enqueue_purge(sub, team, 'consent-revoked', NULL, true, false,
                                   jsonb_build_object('after_cancelled_job_id', waiting.id));
    END IF;
    RETURN 'cancelled';
END $$;
REVOKE ALL ON FUNCTION siwa.cancel_grace_purge(text, text, text) FROM PUBLIC;

-- As sql/017's, for the user (sub, team).
DROP FUNCTION siwa.request_purge(text, text);
CREATE FUNCTION siwa.request_purge(target_sub text, target_team text, login_hint text, OUT job_id bigint, OUT merged boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    queued record;
BEGIN
    IF target_sub IS NULL OR target_sub !~ '^[[:graph:]]{1,255}$' THEN
        RAISE EXCEPTION 'an Apple sub is 1 to 255 printable characters without spaces' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF target_team IS NULL OR target_team !~ '^[A-Z0-9]{10}$' THEN
        RAISE EXCEPTION 'a team id is 10 upper-case letters and digits' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO queued FROM siwa.enqueue_purge(target_sub, target_team, NULL, NULL, false, false, '{}');
    job_id := queued.job_id;
    merged := NOT queued.inserted;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES ('admin', 'purge.requested', target_sub, target_team,
            jsonb_build_object('job_id', job_id, 'merged', merged, 'db_user', session_user::text,
                               'admin', session_user::text, 'login_hint', left(login_hint, 64)));
END $$;
REVOKE ALL ON FUNCTION siwa.request_purge(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.request_purge(text, text, text) TO siwa_admin;

-- As sql/016's, for the user (sub, team).
DROP FUNCTION siwa.reapply_erasure(text, bigint, text, boolean);
CREATE FUNCTION siwa.reapply_erasure(sub text, team text, ledger_job_id bigint, receipt_id text, dry_run boolean,
    OUT outcome text, OUT reapplied_job_id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    user_found boolean := false;
    user_purged boolean := false;
    queued record;
BEGIN
    IF sub IS NULL OR sub = '' OR length(sub) > 255 OR sub ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'siwa.reapply_erasure: sub must be printable text of 1 to 255 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF team IS NULL OR team !~ '^[A-Z0-9]{10}$' THEN
        RAISE EXCEPTION 'siwa.reapply_erasure: a team id is 10 upper-case letters and digits'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF ledger_job_id IS NULL OR ledger_job_id <= 0 THEN
        RAISE EXCEPTION 'siwa.reapply_erasure: ledger_job_id must be a job id' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF receipt_id IS NOT NULL AND (length(receipt_id) > 100 OR receipt_id ~ '[[:cntrl:]]') THEN
        RAISE EXCEPTION 'siwa.reapply_erasure: receipt_id must be printable text of at most 100 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT true, u.purged_at IS NOT NULL INTO user_found, user_purged
    FROM siwa.users AS u WHERE u.apple_sub = sub AND u.apple_team = team FOR UPDATE;
    user_found := coalesce(user_found, false);

    SELECT 'already_reapplied', (a.details->>'job_id')::bigint INTO outcome, reapplied_job_id
    FROM siwa.audit_log AS a
    WHERE a.apple_sub = sub AND a.apple_team IS NOT DISTINCT FROM team AND a.action = 'erasure.reapplied'
      AND a.details->>'ledger_job_id' = ledger_job_id::text
    ORDER BY a.seq DESC LIMIT 1;
    IF FOUND THEN
        RETURN;
    END IF;

    IF user_found AND user_purged THEN
        outcome := 'already_erased';
        RETURN;
    END IF;
    -- Rows written before sql/024 have no team: a job id is one job either way.
    IF user_found AND EXISTS (
        SELECT FROM siwa.audit_log AS back
        WHERE back.apple_sub = sub AND coalesce(back.apple_team, team) = team AND back.action = 'user.account_restarted'
          AND EXISTS (SELECT FROM siwa.audit_log AS done
                      WHERE done.apple_sub = sub AND done.action = 'job.completed'
                        AND done.details->>'job_id' = ledger_job_id::text AND done.seq < back.seq)) THEN
        outcome := 'already_erased';
        RETURN;
    END IF;
    IF NOT user_found AND (
        EXISTS (SELECT FROM siwa.audit_log AS a
                WHERE a.apple_sub = sub AND a.action = 'job.completed' AND a.details->>'job_id' = ledger_job_id::text)
        OR EXISTS (SELECT FROM siwa.deletion_receipts AS r
                   WHERE r.apple_sub = sub AND r.apple_team = team AND (r.job_id = ledger_job_id OR r.jti = receipt_id))) THEN
        outcome := 'already_erased';
        RETURN;
    END IF;

    IF dry_run THEN
        SELECT j.id INTO reapplied_job_id FROM siwa.jobs AS j
        WHERE j.kind = 'purge_user' AND j.args->>'apple_sub' = sub AND j.args->>'apple_team' = team
          AND j.state IN ('available', 'running', 'retryable');
        outcome := CASE WHEN reapplied_job_id IS NULL THEN 'enqueued' ELSE 'pending' END;
        RETURN;
    END IF;
    SELECT e.job_id, e.inserted INTO queued
    FROM siwa.enqueue_purge(sub, team, 'erasure-reapplied', NULL, false, false,
                            jsonb_build_object('ledger_job_id', ledger_job_id)) AS e;
    reapplied_job_id := queued.job_id;
    outcome := CASE WHEN queued.inserted THEN 'enqueued' ELSE 'pending' END;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES ('admin', 'erasure.reapplied', sub, team,
            jsonb_build_object('job_id', reapplied_job_id, 'ledger_job_id', ledger_job_id, 'receipt_id', receipt_id,
                               'outcome', outcome, 'db_user', session_user::text));
END $$;
REVOKE ALL ON FUNCTION siwa.reapply_erasure(text, text, bigint, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.reapply_erasure(text, text, bigint, text, boolean) TO siwa_admin;

-- ------------------------------------------------- the jobs' audit rows --

CREATE OR REPLACE FUNCTION siwa.change_job_as(job_change text, target_job bigint, acting text, acting_details jsonb) RETURNS bigint
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
        UPDATE siwa.jobs AS j SET state = 'available', run_at = now(), finalized_at = NULL,
                                  max_attempts = greatest(j.max_attempts, j.attempt + 1)
        WHERE j.id = target_job RETURNING j.* INTO job;
    ELSIF job_change = 'cancel' THEN
        UPDATE siwa.jobs AS j SET state = 'cancelled', finalized_at = now() WHERE j.id = target_job RETURNING j.* INTO job;
    ELSE
        UPDATE siwa.jobs AS j SET run_at = now(), args = j.args - 'purge_after' WHERE j.id = target_job RETURNING j.* INTO job;
        PERFORM pg_notify('siwa_jobs', job.kind);
    END IF;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES (acting, 'job.' || job_change, job.args->>'apple_sub', job.args->>'apple_team',
            jsonb_build_object('job_id', job.id, 'new_state', job.state, 'db_user', session_user::text) || acting_details)
    RETURNING seq INTO audit_seq;
    RETURN audit_seq;
END $$;

CREATE OR REPLACE FUNCTION siwa.audit_job_widened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES ('queue', 'job.scope_widened', NEW.args->>'apple_sub', NEW.args->>'apple_team',
            jsonb_strip_nulls(jsonb_build_object(
                'job_id', NEW.id, 'kind', NEW.kind, 'event_type', NEW.args->>'event_type',
                'from_scope', OLD.args->>'scope', 'requested_at', siwa.utc_iso(now()),
                'purge_after', NEW.args->'purge_after', 'db_user', session_user::text)));
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION siwa.audit_job_enqueued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES ('queue', 'job.enqueued', NEW.args->>'apple_sub', NEW.args->>'apple_team',
            jsonb_strip_nulls(jsonb_build_object(
                'job_id', NEW.id, 'kind', NEW.kind, 'event_type', NEW.args->>'event_type', 'scope', NEW.args->>'scope',
                'rerun_of', NEW.args->'rerun_of', 'state', NEW.state, 'requested_at', siwa.utc_iso(NEW.created_at),
                'purge_after', NEW.args->'purge_after', 'db_user', session_user::text)));
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION siwa.audit_job_wait_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES ('queue', 'job.wait_ended', NEW.args->>'apple_sub', NEW.args->>'apple_team',
            jsonb_build_object('job_id', NEW.id, 'kind', NEW.kind, 'purge_after', OLD.args->'purge_after',
                               'event_type', NEW.args->>'event_type', 'db_user', session_user::text));
    RETURN NULL;
END $$;

-- The sign-out that follows a sign-out marked while it ran (sql/008).
CREATE OR REPLACE FUNCTION siwa.enqueue_tokens_rerun() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rerun_id bigint;
BEGIN
    INSERT INTO siwa.jobs (kind, args)
    VALUES (NEW.kind, jsonb_build_object('apple_sub', NEW.args->>'apple_sub', 'apple_team', NEW.args->>'apple_team',
                                         'scope', 'tokens', 'rerun_of', NEW.id)
                      || (NEW.args->'rerun_tokens'))
    ON CONFLICT DO NOTHING
    RETURNING id INTO rerun_id;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES ('worker', 'job.rerun_enqueued', NEW.args->>'apple_sub', NEW.args->>'apple_team',
            jsonb_build_object('job_id', rerun_id, 'after_job_id', NEW.id, 'scope', 'tokens'));
    RETURN NULL;
END $$;

-- Token validation's invalid_grant (sql/015), its audit row naming the team.
CREATE OR REPLACE FUNCTION siwa.record_invalid_grant(token_user_id bigint, token_client_id text, token bytea, pause_percent integer)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    pause record;
    invalid_count bigint;
    sub text;
    team text;
BEGIN
    SELECT paused_at INTO pause FROM siwa.token_validation_pause FOR UPDATE;
    IF pause.paused_at IS NOT NULL THEN
        RETURN 'paused';
    END IF;
    PERFORM siwa.note_token_validation(true);
    SELECT count(*) FILTER (WHERE o.invalid_grant) INTO invalid_count
    FROM (SELECT invalid_grant FROM siwa.token_validation_outcomes ORDER BY id DESC LIMIT 100) AS o;
    IF invalid_count > pause_percent THEN
        UPDATE siwa.token_validation_pause
        SET paused_at = now(), reason = format('%s of the last 100 validations answered invalid_grant (limit %s%%)',
                                               invalid_count, pause_percent);
        INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
        VALUES ('worker', 'token_validation.paused', NULL,
                jsonb_build_object('invalid_grant_of_last_100', invalid_count, 'pause_percent', pause_percent));
        RETURN 'paused';
    END IF;
    DELETE FROM siwa.apple_tokens AS t
    WHERE t.user_id = token_user_id AND t.client_id = token_client_id AND t.refresh_token = token;
    IF NOT FOUND THEN
        RETURN 'gone';
    END IF;
    UPDATE siwa.users AS u
    SET stale_tokens_until_ms = greatest(u.stale_tokens_until_ms, (extract(epoch FROM now()) * 1000)::bigint),
        updated_at = now()
    WHERE u.id = token_user_id
    RETURNING u.apple_sub, u.apple_team INTO sub, team;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES ('worker', 'token.invalid_grant', sub, team,
            jsonb_build_object('user_id', token_user_id, 'client_id', token_client_id, 'session_ended', true, 'purge', false));
    RETURN 'session_ended';
END $$;

-- ---------------------------------------------------------------- sign-in --

DROP FUNCTION siwa.sign_in_prepare(text, bytea, integer);
CREATE FUNCTION siwa.sign_in_prepare(sub text, team text, code bytea, replay_window_seconds integer,
    OUT current_id bigint, OUT fresh_id bigint, OUT replay_user_id bigint, OUT replay_sub text,
    OUT replay_is_new boolean, OUT replay_stored boolean)
LANGUAGE sql AS $$
    SELECT (SELECT id FROM siwa.users WHERE apple_sub = sub AND apple_team = team),
           nextval(pg_get_serial_sequence('siwa.users', 'id')),
           r.user_id, r.apple_sub, r.is_new_user, r.refresh_token_stored
    FROM (SELECT 1) AS one
    LEFT JOIN siwa.sign_in_replay(code, replay_window_seconds) AS r ON true
$$;
REVOKE ALL ON FUNCTION siwa.sign_in_prepare(text, text, bytea, integer) FROM PUBLIC;

-- As sql/023's, for the user (sub, team), remembering the client id.
DROP FUNCTION siwa.sign_in(text, bigint, bigint, text, text, boolean, text, text, smallint, bigint, bytea, text,
                           text, bytea, bytea, bytea, bytea, integer, integer, boolean, text, text);
CREATE FUNCTION siwa.sign_in(
    sub text, team text, current_id bigint, fresh_id bigint, client_id text, email text, is_private_email boolean,
    given_name text, family_name text, real_user_status smallint, signed_in_ms bigint, code bytea, api_key text,
    key_id text, refresh_for_current bytea, access_for_current bytea, refresh_for_fresh bytea, access_for_fresh bytea,
    access_expires_in integer, validation_hours integer, email_verified boolean, org_id text, transfer_sub text,
    OUT outcome text, OUT user_id bigint, OUT is_new_user boolean, OUT user_email text,
    OUT user_is_private_email boolean, OUT user_real_user_status smallint, OUT user_email_verified boolean,
    OUT user_given_name text, OUT user_family_name text)
LANGUAGE plpgsql AS $$
DECLARE
    found_id bigint;
    found_status text;
    found_purged boolean;
    found_stale_until bigint;
    found_last_sign_in_ms bigint;
    pending boolean;
    target bigint;
    renamed boolean;
BEGIN
    IF sign_in.transfer_sub IS NOT NULL AND current_id IS NULL
       AND NOT EXISTS (SELECT FROM siwa.users AS u WHERE u.apple_sub = sub AND u.apple_team = team)
       AND siwa.link_transferred_sign_in(sign_in.transfer_sub, sub, team) THEN
        outcome := 'again';
        RETURN;
    END IF;
    SELECT u.id, u.status, u.purged_at IS NOT NULL, u.stale_tokens_until_ms,
           (extract(epoch FROM u.last_sign_in_at) * 1000)::bigint
    INTO found_id, found_status, found_purged, found_stale_until, found_last_sign_in_ms
    FROM siwa.users AS u WHERE u.apple_sub = sub AND u.apple_team = team FOR UPDATE;
    IF found_id IS NOT NULL THEN
        IF signed_in_ms <= found_stale_until THEN
            outcome := 'stale_identity_token';
            RETURN;
        END IF;
        IF NOT found_purged AND found_id IS DISTINCT FROM current_id THEN
            outcome := 'again';
            RETURN;
        END IF;
        IF siwa.cancel_grace_purge(sub, team, api_key) = 'underway' THEN
            outcome := 'deletion_in_progress';
            RETURN;
        END IF;
        SELECT EXISTS (SELECT FROM siwa.jobs AS j WHERE j.kind = 'purge_user' AND j.args->>'apple_sub' = sub
                       AND j.args->>'apple_team' = team AND j.state IN ('available', 'running', 'retryable')
                       -- a token-only sign-out, unless a deletion marked it for a rerun
                       AND (NOT j.args ? 'scope' OR j.args ? 'rerun')) INTO pending;
        IF pending OR (found_status = 'deleted' AND NOT found_purged) THEN
            outcome := 'deletion_in_progress';
            RETURN;
        END IF;
        target := CASE WHEN found_purged THEN fresh_id ELSE found_id END;
    ELSE
        target := fresh_id;
    END IF;

    IF found_id IS NULL THEN
        INSERT INTO siwa.users AS u (id, apple_sub, apple_team, client_id, status, status_event_time, email, is_private_email,
                                     email_event_time, given_name, family_name, real_user_status, last_sign_in_at,
                                     email_verified, org_id, transfer_sub)
        VALUES (fresh_id, sub, team, sign_in.client_id, 'active', signed_in_ms, email, is_private_email,
                CASE WHEN email IS NULL THEN NULL ELSE signed_in_ms END, given_name, family_name, real_user_status, now(),
                CASE WHEN email IS NULL THEN NULL ELSE email_verified END, org_id, sign_in.transfer_sub)
        ON CONFLICT (apple_sub, apple_team) DO NOTHING
        RETURNING u.id, u.email, u.is_private_email, u.real_user_status, u.email_verified, u.given_name, u.family_name
        INTO user_id, user_email, user_is_private_email, user_real_user_status, user_email_verified, user_given_name,
             user_family_name;
        IF user_id IS NULL THEN
            outcome := 'again';
            RETURN;
        END IF;
        is_new_user := true;
    ELSIF found_purged THEN
        UPDATE siwa.users AS u SET id = fresh_id, status = 'active', status_event_time = signed_in_ms,
            email = sign_in.email, is_private_email = sign_in.is_private_email, email_forwarding_enabled = true,
            email_event_time = signed_in_ms, given_name = sign_in.given_name, family_name = sign_in.family_name,
            real_user_status = sign_in.real_user_status, last_sign_in_at = now(), purged_at = NULL,
            email_verified = CASE WHEN sign_in.email IS NULL THEN NULL ELSE sign_in.email_verified END,
            org_id = sign_in.org_id, transfer_sub = sign_in.transfer_sub, client_id = sign_in.client_id,
            created_at = now(), updated_at = now()
        WHERE u.id = found_id
        RETURNING u.id, u.email, u.is_private_email, u.real_user_status, u.email_verified, u.given_name, u.family_name
        INTO user_id, user_email, user_is_private_email, user_real_user_status, user_email_verified, user_given_name,
             user_family_name;
        INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
        VALUES ('api', 'user.account_restarted', sub, team,
                jsonb_build_object('user_id', fresh_id, 'previous_user_id', found_id, 'previous_status', found_status));
        is_new_user := true;
    ELSE
        renamed := (sign_in.given_name IS NOT NULL OR sign_in.family_name IS NOT NULL)
                   AND (found_status = 'consent_revoked'
                        OR found_stale_until > coalesce(found_last_sign_in_ms, 0));
        UPDATE siwa.users AS u SET status = 'active', status_event_time = signed_in_ms,
            email = coalesce(sign_in.email, u.email),
            is_private_email = CASE WHEN sign_in.email IS NULL THEN u.is_private_email
                                    ELSE coalesce(sign_in.is_private_email, u.is_private_email) END,
            email_verified = CASE WHEN sign_in.email IS NULL THEN u.email_verified ELSE sign_in.email_verified END,
            email_event_time = CASE WHEN sign_in.email IS NULL THEN u.email_event_time
                                    ELSE greatest(u.email_event_time, signed_in_ms) END,
            given_name = CASE WHEN renamed THEN sign_in.given_name ELSE coalesce(u.given_name, sign_in.given_name) END,
            family_name = CASE WHEN renamed THEN sign_in.family_name ELSE coalesce(u.family_name, sign_in.family_name) END,
            real_user_status = coalesce(sign_in.real_user_status, u.real_user_status),
            org_id = coalesce(sign_in.org_id, u.org_id),
            transfer_sub = coalesce(sign_in.transfer_sub, u.transfer_sub),
            client_id = sign_in.client_id,
            last_sign_in_at = now(), updated_at = now()
        WHERE u.id = found_id
        RETURNING u.id, u.email, u.is_private_email, u.real_user_status, u.email_verified, u.given_name, u.family_name
        INTO user_id, user_email, user_is_private_email, user_real_user_status, user_email_verified, user_given_name,
             user_family_name;
        is_new_user := false;
    END IF;

    IF refresh_for_current IS NOT NULL OR refresh_for_fresh IS NOT NULL THEN
        INSERT INTO siwa.apple_tokens AS t (user_id, client_id, key_id, refresh_token, access_token, access_expires_at, validate_after)
        VALUES (target, sign_in.client_id, key_id,
                CASE WHEN target = fresh_id THEN refresh_for_fresh ELSE refresh_for_current END,
                CASE WHEN target = fresh_id THEN access_for_fresh ELSE access_for_current END,
                now() + make_interval(secs => access_expires_in),
                now() + make_interval(hours => validation_hours) * (1 + random() / 4))
        ON CONFLICT ON CONSTRAINT apple_tokens_pkey DO UPDATE SET
            key_id = excluded.key_id, refresh_token = excluded.refresh_token, access_token = excluded.access_token,
            access_expires_at = excluded.access_expires_at, stored_at = now(), last_validated_at = NULL,
            validate_after = excluded.validate_after, validation_failures = 0;
    END IF;
    IF code IS NOT NULL THEN
        INSERT INTO siwa.sign_in_codes (code_sha256, user_id, apple_sub, is_new_user, refresh_token_stored)
        VALUES (code, target, sub, is_new_user, refresh_for_current IS NOT NULL OR refresh_for_fresh IS NOT NULL)
        ON CONFLICT (code_sha256) DO NOTHING;
    END IF;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES ('api', 'user.signed_in', sub, team,
            jsonb_build_object('user_id', target, 'api_key', api_key, 'is_new_user', is_new_user, 'client_id', client_id,
                               'refresh_token_stored', refresh_for_current IS NOT NULL OR refresh_for_fresh IS NOT NULL)
            || CASE WHEN renamed THEN jsonb_build_object('names_replaced', true) ELSE '{}'::jsonb END);
    outcome := 'stored';
END $$;
REVOKE ALL ON FUNCTION siwa.sign_in(text, text, bigint, bigint, text, text, boolean, text, text, smallint, bigint, bytea, text,
                                    text, bytea, bytea, bytea, bytea, integer, integer, boolean, text, text) FROM PUBLIC;

-- ----------------------------------------------------------- app transfer --

-- As sql/023's: the user moves to the receiving team's (new sub, team);
-- the move remembers both pairs.
CREATE OR REPLACE FUNCTION siwa.move_transferred_user_as(acting text, via text, moved_user bigint, expected_transfer_sub text,
                                                         expected_team text, new_sub text, new_email text, new_is_private boolean)
RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    moving siwa.users;
    holder bigint;
BEGIN
    IF new_sub IS NULL OR new_sub !~ '^[[:graph:]]{1,255}$' THEN
        RAISE EXCEPTION 'an Apple sub is 1 to 255 printable characters without spaces' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO moving FROM siwa.users AS u WHERE u.id = moved_user FOR UPDATE;
    IF NOT FOUND OR moving.transfer_sub IS DISTINCT FROM expected_transfer_sub
       OR moving.transfer_team IS DISTINCT FROM expected_team THEN
        RETURN 'not_awaiting';
    END IF;
    IF moving.transfer_phase = 'complete' AND moving.transfer_state = 'done' THEN
        RETURN 'already_done';
    END IF;
    IF NOT coalesce((moving.transfer_phase = 'prepare' AND moving.transfer_state = 'done')
                    OR (moving.transfer_phase = 'complete' AND moving.transfer_state IN ('pending', 'failed')), false) THEN
        RETURN 'not_awaiting';
    END IF;
    IF moving.purged_at IS NOT NULL OR moving.status = 'deleted' THEN
        UPDATE siwa.users AS u SET transfer_phase = 'complete', transfer_state = 'failed',
            transfer_reason = 'the user was deleted before the transfer completed', transfer_updated_at = now()
        WHERE u.id = moved_user;
        RETURN 'deleted';
    END IF;
    SELECT u.id INTO holder FROM siwa.users AS u
    WHERE u.apple_sub = new_sub AND u.apple_team = expected_team AND u.id <> moved_user;
    IF holder IS NOT NULL THEN
        UPDATE siwa.users AS u SET transfer_phase = 'complete', transfer_state = 'failed',
            transfer_reason = 'the new sub belongs to siwa user ' || holder || ' already (signed in before the transfer completed)',
            transfer_updated_at = now()
        WHERE u.id = moved_user;
        RETURN 'sub_taken';
    END IF;
    UPDATE siwa.users AS u SET apple_sub = new_sub, apple_team = expected_team,
        email = coalesce(new_email, u.email),
        is_private_email = CASE WHEN new_email IS NULL THEN u.is_private_email ELSE coalesce(new_is_private, true) END,
        email_verified = CASE WHEN new_email IS NULL THEN u.email_verified ELSE true END,
        transfer_phase = 'complete', transfer_state = 'done', transfer_reason = NULL, transfer_updated_at = now(),
        updated_at = now()
    WHERE u.id = moved_user;
    IF moving.apple_sub IS NOT NULL AND (moving.apple_sub, moving.apple_team) IS DISTINCT FROM (new_sub, expected_team) THEN
        INSERT INTO siwa.user_moves AS m (old_sub, old_team, new_sub, new_team, user_id)
        VALUES (moving.apple_sub, moving.apple_team, new_sub, expected_team, moved_user)
        ON CONFLICT (old_sub, old_team) DO UPDATE SET new_sub = excluded.new_sub, new_team = excluded.new_team,
            user_id = excluded.user_id, moved_at = now();
    END IF;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES (acting, 'user.transferred', new_sub, expected_team,
            jsonb_build_object('user_id', moved_user, 'old_sub', moving.apple_sub, 'old_team', moving.apple_team,
                               'new_sub', new_sub, 'team', expected_team, 'via', via, 'imported', moving.apple_sub IS NULL));
    RETURN 'moved';
END $$;

-- As sql/023's: only a user awaiting a transfer to the token's team.
DROP FUNCTION siwa.link_transferred_sign_in(text, text);
CREATE FUNCTION siwa.link_transferred_sign_in(token_transfer_sub text, token_sub text, token_team text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    awaiting siwa.users;
BEGIN
    SELECT * INTO awaiting FROM siwa.users AS u
    WHERE u.transfer_sub = token_transfer_sub AND u.transfer_team = token_team
      AND ((u.transfer_phase = 'prepare' AND u.transfer_state = 'done')
           OR (u.transfer_phase = 'complete' AND u.transfer_state IN ('pending', 'failed')))
    ORDER BY u.id LIMIT 1;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    RETURN siwa.move_transferred_user_as('api', 'sign_in', awaiting.id, token_transfer_sub, token_team,
                                         token_sub, NULL, NULL) = 'moved';
END $$;
REVOKE ALL ON FUNCTION siwa.link_transferred_sign_in(text, text, text) FROM PUBLIC;

-- As sql/023's: only the users of `source_team` move, and their jobs name it.
CREATE OR REPLACE FUNCTION siwa.start_transfer_prepare(target text, source_team text, transfer_client text, login_hint text,
                                                       OUT users_pending bigint, OUT users_done bigint, OUT jobs_enqueued bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF target IS NULL OR target !~ '^[A-Z0-9]{10}$' OR source_team IS NULL OR source_team !~ '^[A-Z0-9]{10}$' THEN
        RAISE EXCEPTION 'a team id is 10 upper-case letters and digits' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF target = source_team THEN
        RAISE EXCEPTION 'the app is in team % already: --to names the team it moves to', target USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF transfer_client IS NULL OR transfer_client !~ '^[[:graph:]]{1,255}$' THEN
        RAISE EXCEPTION 'a client id is 1 to 255 printable characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE siwa.users AS u SET transfer_sub = CASE WHEN u.transfer_team IS DISTINCT FROM target THEN NULL ELSE u.transfer_sub END,
        transfer_team = target, transfer_phase = 'prepare', transfer_state = 'pending', transfer_reason = NULL,
        transfer_attempts = 0, transfer_updated_at = now()
    WHERE u.apple_team = source_team AND u.purged_at IS NULL AND u.status <> 'deleted'
      AND NOT coalesce(u.transfer_phase = 'complete' AND u.transfer_state <> 'done', false)
      AND NOT coalesce(u.transfer_phase = 'prepare' AND u.transfer_team = target AND u.transfer_state = 'done', false);
    WITH queued AS (
        INSERT INTO siwa.jobs (kind, args)
        SELECT 'transfer_prepare', jsonb_build_object('apple_sub', u.apple_sub, 'apple_team', u.apple_team, 'user_id', u.id,
                                                      'team', target, 'client_id', transfer_client)
        FROM siwa.users AS u
        WHERE u.transfer_team = target AND u.transfer_phase = 'prepare' AND u.transfer_state = 'pending'
          AND u.apple_team = source_team
          AND NOT EXISTS (SELECT FROM siwa.jobs AS j WHERE j.kind = 'transfer_prepare' AND j.args->>'user_id' = u.id::text
                          AND j.args->>'team' = target AND j.state IN ('available', 'running', 'retryable'))
        ORDER BY u.id
        RETURNING 1
    )
    SELECT count(*) INTO jobs_enqueued FROM queued;
    SELECT count(*) FILTER (WHERE u.transfer_state = 'pending'), count(*) FILTER (WHERE u.transfer_state = 'done')
    INTO users_pending, users_done
    FROM siwa.users AS u WHERE u.transfer_team = target AND u.transfer_phase = 'prepare' AND u.apple_team = source_team;
    INSERT INTO siwa.audit_log (actor, action, details)
    VALUES ('admin', 'transfer.prepare_started',
            jsonb_build_object('target_team', target, 'source_team', source_team, 'client_id', transfer_client,
                               'users_pending', users_pending, 'users_done', users_done, 'jobs_enqueued', jobs_enqueued,
                               'db_user', session_user::text, 'login_hint', left(login_hint, 64)));
END $$;

-- As sql/023's, the jobs naming each user's team as it stands (none for
-- an imported user, which has no sub yet).
CREATE OR REPLACE FUNCTION siwa.start_transfer_complete(team text, transfer_client text, login_hint text,
                                                        OUT users_pending bigint, OUT users_done bigint, OUT jobs_enqueued bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    prepared_for text;
BEGIN
    IF team IS NULL OR team !~ '^[A-Z0-9]{10}$' THEN
        RAISE EXCEPTION 'a team id is 10 upper-case letters and digits' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF transfer_client IS NULL OR transfer_client !~ '^[[:graph:]]{1,255}$' THEN
        RAISE EXCEPTION 'a client id is 1 to 255 printable characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM siwa.users AS u WHERE u.transfer_team = team
                   AND ((u.transfer_phase = 'prepare' AND u.transfer_state = 'done') OR u.transfer_phase = 'complete')) THEN
        SELECT string_agg(DISTINCT u.transfer_team, ', ') INTO prepared_for FROM siwa.users AS u WHERE u.transfer_team IS NOT NULL;
        RAISE EXCEPTION 'no user awaits a transfer to team % (%): run siwa transfer prepare (or import) first, and complete with the receiving team''s settings',
                        team, coalesce('prepared for ' || prepared_for, 'nothing is prepared')
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    UPDATE siwa.users AS u SET transfer_phase = 'complete', transfer_state = 'pending', transfer_reason = NULL,
        transfer_attempts = 0, transfer_updated_at = now()
    WHERE u.transfer_team = team
      AND ((u.transfer_phase = 'prepare' AND u.transfer_state = 'done')
           OR (u.transfer_phase = 'complete' AND u.transfer_state = 'failed'));
    WITH queued AS (
        INSERT INTO siwa.jobs (kind, args)
        SELECT 'transfer_complete', jsonb_build_object('apple_sub', u.apple_sub, 'apple_team', u.apple_team, 'user_id', u.id,
                                                       'team', team, 'client_id', transfer_client)
        FROM siwa.users AS u
        WHERE u.transfer_team = team AND u.transfer_phase = 'complete' AND u.transfer_state = 'pending'
          AND NOT EXISTS (SELECT FROM siwa.jobs AS j WHERE j.kind = 'transfer_complete' AND j.args->>'user_id' = u.id::text
                          AND j.args->>'team' = team AND j.state IN ('available', 'running', 'retryable'))
        ORDER BY u.id
        RETURNING 1
    )
    SELECT count(*) INTO jobs_enqueued FROM queued;
    SELECT count(*) FILTER (WHERE u.transfer_state = 'pending'), count(*) FILTER (WHERE u.transfer_state = 'done')
    INTO users_pending, users_done
    FROM siwa.users AS u WHERE u.transfer_team = team AND u.transfer_phase = 'complete';
    INSERT INTO siwa.audit_log (actor, action, details)
    VALUES ('admin', 'transfer.complete_started',
            jsonb_build_object('team', team, 'client_id', transfer_client, 'users_pending', users_pending,
                               'users_done', users_done, 'jobs_enqueued', jobs_enqueued,
                               'db_user', session_user::text, 'login_hint', left(login_hint, 64)));
END $$;

-- ------------------------------------------------------------ app events --

-- A delivery's args name the user's team beside the sub (its audit rows do).
DROP FUNCTION siwa.app_event_args(bigint, text, integer, text);
CREATE FUNCTION siwa.app_event_args(seq bigint, sub text, team text, event_position integer, event_type text)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('apple_sub', sub, 'apple_team', team, 'event_type', event_type, 'audit_seq', seq,
                              'event_id', 'evt_' || seq || '_' || event_position)
$$;
REVOKE ALL ON FUNCTION siwa.app_event_args(bigint, text, text, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.app_event_args(bigint, text, text, integer, text) TO siwa_admin;

CREATE OR REPLACE FUNCTION siwa.enqueue_app_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    idle boolean;
BEGIN
    IF NOT coalesce((SELECT enabled FROM siwa.app_webhook), false) THEN
        RETURN NULL;
    END IF;
    idle := siwa.app_events_idle();
    INSERT INTO siwa.jobs (kind, args, run_at)
    SELECT 'app_event', siwa.app_event_args(NEW.seq, NEW.apple_sub, NEW.apple_team, e.event_position, e.event_type),
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

-- A delivery's body (sql/019), its args checked against its audit row's
-- team too (a row written before sql/024 names none).
CREATE OR REPLACE FUNCTION siwa.app_event_body(args jsonb, include_email boolean,
                                               OUT event_id text, OUT occurred_at text, OUT data jsonb)
LANGUAGE sql STABLE AS $$
    SELECT 'evt_' || a.seq || '_' || e.event_position, body.occurred_at, body.data
    FROM siwa.audit_log AS a,
         siwa.app_events_of(a.action, a.details,
                            CASE WHEN a.action IN ('job.completed', 'job.discarded')
                                 THEN siwa.app_event_job_kind((a.details->>'job_id')::bigint, a.apple_sub, a.seq) END) AS e,
         siwa.app_event_payload(a.seq, e.event_type, include_email) AS body
    WHERE a.seq = (args->>'audit_seq')::bigint
      AND a.apple_sub IS NOT DISTINCT FROM args->>'apple_sub'
      AND (a.apple_team IS NULL OR a.apple_team = args->>'apple_team')
      AND e.event_type = args->>'event_type'
      AND 'evt_' || a.seq || '_' || e.event_position = args->>'event_id'
$$;

-- What the app receives: as sql/023's, and every event names the user's
-- team and the client id it concerns (an Apple event's `aud`, a sign-in's
-- client, else the user's latest); `user.transferred` names the old team.
CREATE OR REPLACE FUNCTION siwa.app_event_payload(event_seq bigint, app_type text, include_email boolean,
                                                  OUT occurred_at text, OUT data jsonb)
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN app_type LIKE 'apple.%' AND a.details ? 'event_time'
                THEN siwa.utc_iso(to_timestamp((a.details->>'event_time')::bigint / 1000.0))
                ELSE siwa.utc_iso(a.occurred_at) END,
           jsonb_build_object('sub', a.apple_sub) || jsonb_strip_nulls(jsonb_build_object(
               'team', a.apple_team,
               'client_id', coalesce(n.audience, a.details->>'client_id',
                                     (SELECT u.client_id FROM siwa.users AS u
                                      WHERE u.apple_sub = a.apple_sub AND u.apple_team = a.apple_team))))
           || jsonb_strip_nulls(CASE
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
                   'refresh_token_stored', a.details->'refresh_token_stored')
               WHEN app_type = 'user.deletion_requested' THEN jsonb_build_object(
                   'user_id', a.details->'user_id', 'purge_job_id', a.details->'job_id', 'merged', a.details->'merged')
               WHEN app_type = 'user.transferred' THEN jsonb_build_object(
                   'user_id', a.details->'user_id', 'previous_sub', a.details->'old_sub',
                   'previous_team', a.details->'old_team', 'via', a.details->'via')
               WHEN app_type = 'token.invalid_grant' THEN jsonb_build_object(
                   'user_id', a.details->'user_id',
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

-- As sql/023's, the deliveries naming each event's team. A sub picks its
-- events in every team that has it (an operator's replay is over-broad
-- rather than short).
CREATE OR REPLACE FUNCTION siwa.replay_app_events(replay_since timestamptz, replay_sub text, replay_limit integer, login_hint text,
    OUT webhook_enabled boolean, OUT enqueued bigint, OUT already_pending bigint, OUT last_occurred text,
    OUT events_found bigint, OUT woken bigint)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH switch AS (
        SELECT w.enabled FROM siwa.app_webhook AS w
    ), events AS MATERIALIZED (
        SELECT a.seq, a.apple_sub, a.apple_team, a.occurred_at, e.event_position, e.event_type
        FROM siwa.audit_log AS a,
             LATERAL siwa.app_events_of(a.action, a.details,
                 CASE WHEN a.action LIKE 'job.%'
                      THEN siwa.app_event_job_kind((a.details->>'job_id')::bigint, a.apple_sub, a.seq) END) AS e
        WHERE a.action IN ('notification.recorded', 'user.signed_in', 'user.deletion_requested', 'user.transferred',
                           'token.invalid_grant',
                           'purge.cancelled', 'job.completed', 'job.discarded')
          AND a.occurred_at >= replay_since
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
        SELECT 'app_event', siwa.app_event_args(fresh.seq, fresh.apple_sub, fresh.apple_team, fresh.event_position,
                                                fresh.event_type),
               siwa.app_event_run_at(fresh.apple_sub)
        FROM fresh ORDER BY fresh.seq, fresh.event_position
        RETURNING id
    ), audit AS (
        INSERT INTO siwa.audit_log (actor, action, details)
        SELECT 'admin', 'app_events.replayed',
               jsonb_strip_nulls(jsonb_build_object('sub', replay_sub))
               || jsonb_build_object('since', siwa.utc_iso(replay_since), 'enqueued', (SELECT count(*) FROM queued),
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

-- ------------------------------------------------------------------ views --

-- The team of each row, last (a view may only grow at its end).
CREATE OR REPLACE VIEW siwa.user_history AS
    SELECT apple_sub, at, source, action, details, apple_team
    FROM (
        SELECT n.apple_sub, n.apple_team, n.received_at AS at, 'notification' AS source, n.event_type AS action,
               jsonb_build_object('notification_id', n.id, 'jti', n.jti, 'audience', n.audience,
                                  'event_time', siwa.utc_iso(to_timestamp(n.event_time / 1000.0)),
                                  'issued_at', siwa.utc_iso(n.issued_at)) AS details,
               0 AS part, n.id AS position
        FROM siwa.notifications AS n
        UNION ALL
        SELECT a.apple_sub, a.apple_team, a.occurred_at, 'audit', a.action,
               a.details || jsonb_build_object('seq', a.seq, 'actor', a.actor), 1, a.seq
        FROM siwa.audit_log AS a
        UNION ALL
        SELECT j.args->>'apple_sub', j.args->>'apple_team', coalesce(j.finalized_at, j.attempted_at, j.created_at), 'job',
               'job.' || j.state,
               jsonb_strip_nulls(jsonb_build_object(
                   'job_id', j.id, 'kind', j.kind, 'state', j.state, 'attempt', j.attempt, 'max_attempts', j.max_attempts,
                   'event_type', j.args->>'event_type', 'scope', j.args->>'scope', 'rerun_of', j.args->'rerun_of',
                   'created_at', siwa.utc_iso(j.created_at), 'next_run_at',
                   CASE WHEN j.state IN ('available', 'retryable') THEN siwa.utc_iso(j.run_at) END,
                   'steps_done', j.steps_done)), 2, j.id
        FROM siwa.jobs AS j
    ) AS history
    ORDER BY at, part, position;

CREATE OR REPLACE VIEW siwa.purge_requests AS
    SELECT a.seq, a.apple_sub, (a.details->>'job_id')::bigint AS job_id, a.details->>'event_type' AS event_type,
           (a.details->>'requested_at')::timestamptz AS requested_at,
           coalesce(least((a.details->>'purge_after')::timestamptz,
                          (SELECT min(w.occurred_at) FROM siwa.audit_log AS w
                           WHERE w.apple_sub = a.apple_sub AND w.action = 'job.wait_ended'
                             AND w.details->>'job_id' = a.details->>'job_id')),
                    (a.details->>'requested_at')::timestamptz) AS due_at,
           a.apple_team
    FROM siwa.audit_log AS a
    WHERE a.action IN ('job.enqueued', 'job.scope_widened') AND a.details->>'kind' = 'purge_user' AND NOT a.details ? 'scope';

CREATE OR REPLACE VIEW siwa.purge_latency AS
    SELECT r.apple_sub, r.job_id, r.event_type, r.requested_at, done.completed_at,
           extract(epoch FROM done.completed_at - r.due_at)::double precision AS seconds,
           CASE WHEN done.completed_at IS NOT NULL THEN 'completed' ELSE coalesce(j.state, 'cancelled') END AS state,
           r.due_at, r.apple_team
    FROM siwa.purge_requests AS r
    LEFT JOIN LATERAL (SELECT min(a.occurred_at) AS completed_at FROM siwa.audit_log AS a
                       WHERE a.apple_sub = r.apple_sub AND a.action = 'job.completed'
                         AND a.details->>'job_id' = r.job_id::text) AS done ON true
    LEFT JOIN siwa.jobs AS j ON j.id = r.job_id;

CREATE OR REPLACE VIEW siwa.attention AS
    SELECT j.id AS job_id, j.args->>'apple_sub' AS apple_sub, j.state, j.attempt,
           failure.last_error,
           CASE WHEN j.state = 'discarded' THEN coalesce(j.finalized_at, j.created_at)
                ELSE coalesce((j.args->>'purge_after')::timestamptz, j.created_at) END AS since,
           j.args->>'apple_team' AS apple_team
    FROM siwa.jobs AS j
    LEFT JOIN LATERAL (SELECT coalesce(a.details->>'step' || ': ', '') || coalesce(a.details->>'error', a.action) AS last_error
                       FROM siwa.audit_log AS a
                       WHERE a.apple_sub = j.args->>'apple_sub'
                         AND a.action IN ('job.retry_scheduled', 'job.discarded', 'job.rescued')
                         AND a.details->>'job_id' = j.id::text
                       ORDER BY a.seq DESC LIMIT 1) AS failure ON true
    WHERE j.state = 'discarded'
       OR (j.kind = 'purge_user' AND j.state IN ('available', 'running', 'retryable')
           AND coalesce((j.args->>'purge_after')::timestamptz, j.created_at)
               < now() - make_interval(hours => (SELECT purge_sla_hours FROM siwa.report_settings)));

CREATE OR REPLACE VIEW siwa.waiting_purges AS
    SELECT j.id AS job_id, j.args->>'apple_sub' AS apple_sub, j.created_at AS requested_at,
           (j.args->>'purge_after')::timestamptz AS due_at, j.args->>'apple_team' AS apple_team
    FROM siwa.jobs AS j
    WHERE j.kind = 'purge_user' AND j.state IN ('available', 'retryable', 'running')
      AND (j.args->>'purge_after')::timestamptz > now();

-- ----------------------------------------------------------------- grants --

-- The rows naming signatures that are gone name the new ones.
UPDATE siwa.runtime_grants
SET statement = 'GRANT EXECUTE ON FUNCTION siwa.enqueue_purge(text, text, text, text, boolean, boolean, jsonb) TO %I'
WHERE (migration, position) = (8, 1);
UPDATE siwa.runtime_grants
SET statement = 'GRANT EXECUTE ON FUNCTION siwa.sign_in_prepare(text, text, bytea, integer) TO %I'
WHERE (migration, position) = (6, 2);
UPDATE siwa.runtime_grants
SET statement = 'GRANT EXECUTE ON FUNCTION siwa.sign_in(text, text, bigint, bigint, text, text, boolean, text, text, smallint, '
                'bigint, bytea, text, text, bytea, bytea, bytea, bytea, integer, integer, boolean, text, text) TO %I'
WHERE (migration, position) = (22, 1);
UPDATE siwa.runtime_grants
SET statement = 'GRANT EXECUTE ON FUNCTION siwa.cancel_grace_purge(text, text, text) TO %I'
WHERE (migration, position) = (15, 1);
UPDATE siwa.runtime_grants
SET statement = 'GRANT EXECUTE ON FUNCTION siwa.link_transferred_sign_in(text, text, text) TO %I'
WHERE (migration, position) = (23, 2);
UPDATE siwa.runtime_grants
SET statement = 'GRANT EXECUTE ON FUNCTION siwa.app_events_of(text, jsonb, text), siwa.app_event_args(bigint, text, text, integer, text), '
                'siwa.app_event_run_at(text), siwa.app_event_job_kind(bigint, text, bigint), siwa.enqueue_app_events(), '
                'siwa.app_events_idle() TO %I'
WHERE (migration, position) = (14, 2);
