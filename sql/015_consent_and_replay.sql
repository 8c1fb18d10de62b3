-- Consent revoked as TN3194 asks, `invalid_grant` as the session ending it
-- is, and identity tokens that cannot undo either.
--
-- 1. A consent revocation under SIWA_ON_CONSENT_REVOKED=purge schedules the
--    user's purge SIWA_CONSENT_REVOKED_PURGE_DELAY_DAYS later: the job
--    carries `args.purge_after`, runs at once to revoke the user's Apple
--    tokens (they go now), then waits (PurgeJobRunner snoozes it until then).
--    A verified sign-in before then cancels it (siwa.cancel_grace_purge); an
--    account deletion, at Apple or in the app, ends the wait (siwa.enqueue_purge).
-- 2. A refresh token Apple answers `invalid_grant` for ends the user's
--    session (Apple does so on a password change too): the token goes, the
--    user stays active, nothing is purged (siwa.record_invalid_grant). Past
--    a share of invalid_grant answers, validation pauses until an operator
--    resumes it (siwa.resume_token_validation).
-- 3. An identity token issued at or before the user's last revocation,
--    deletion request, purge or ended session signs nobody in
--    (users.stale_tokens_until_ms, checked by siwa.sign_in).

-- ------------------------------------------------------- stale tokens --

-- Identity tokens issued at or before this moment (ms since 1970: Apple's
-- clock for Apple's events, siwa's for its own) are refused by sign-in
-- (409 stale_identity_token). It only grows.
ALTER TABLE siwa.users ADD COLUMN stale_tokens_until_ms bigint;

UPDATE siwa.users SET stale_tokens_until_ms = greatest(
    CASE WHEN status IN ('consent_revoked', 'deleted') THEN status_event_time END,
    (extract(epoch FROM purged_at) * 1000)::bigint)
WHERE status <> 'active' OR purged_at IS NOT NULL;

-- Whoever revokes, deletes or purges a user (the inbox statement, in-app
-- deletion, the purge's erase, an operator's UPDATE) moves the mark: a
-- trigger, so no writer can forget it. Its WHEN clauses keep the inbox's
-- other upserts free of it.
CREATE FUNCTION siwa.stamp_stale_tokens() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.stale_tokens_until_ms := greatest(
        NEW.stale_tokens_until_ms,
        CASE WHEN NEW.status IN ('consent_revoked', 'deleted')
                  AND (TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status
                       OR NEW.status_event_time IS DISTINCT FROM OLD.status_event_time)
             THEN NEW.status_event_time END,
        CASE WHEN NEW.purged_at IS NOT NULL AND (TG_OP = 'INSERT' OR OLD.purged_at IS NULL)
             THEN (extract(epoch FROM NEW.purged_at) * 1000)::bigint END);
    RETURN NEW;
END $$;

CREATE TRIGGER users_stale_tokens_on_insert
    BEFORE INSERT ON siwa.users
    FOR EACH ROW WHEN (NEW.status <> 'active' OR NEW.purged_at IS NOT NULL)
    EXECUTE FUNCTION siwa.stamp_stale_tokens();

CREATE TRIGGER users_stale_tokens_on_update
    BEFORE UPDATE ON siwa.users
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status OR NEW.purged_at IS DISTINCT FROM OLD.purged_at
                       OR (NEW.status <> 'active' AND NEW.status_event_time IS DISTINCT FROM OLD.status_event_time))
    EXECUTE FUNCTION siwa.stamp_stale_tokens();

-- ------------------------------------------------------- grace purges --

-- How purges and sign-outs merge (sql/008), with one rule more, first: a
-- purge due now (an account deletion, at Apple or in the app; an operator's
-- request) into a purge still waiting out its grace delay ends the wait,
-- whatever its state: the runner finds no `purge_after` left when it would
-- snooze, and carries on. A waiting job that has not started runs now.
--
-- SECURITY DEFINER: serve enqueues and merges only through here, so its
-- role needs no UPDATE on siwa.jobs (it could otherwise rewrite a pending
-- purge's args: make it a sign-out, point it at another sub). `extra` takes
-- only the keys siwa's callers pass.
CREATE OR REPLACE FUNCTION siwa.enqueue_purge(sub text, event_type text, jti text, tokens_only boolean, renotify boolean,
    extra jsonb DEFAULT '{}', OUT job_id bigint, OUT job_state text, OUT inserted boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    request jsonb := jsonb_build_object('apple_sub', sub, 'event_type', event_type)
                     || jsonb_strip_nulls(jsonb_build_object('jti', jti)) || extra;
BEGIN
    IF jsonb_typeof(extra) IS DISTINCT FROM 'object' OR EXISTS (
        SELECT FROM jsonb_object_keys(extra) AS k
        WHERE k NOT IN ('purge_after', 'api_key', 'after_cancelled_job_id', 'ledger_job_id')) THEN
        RAISE EXCEPTION 'siwa.enqueue_purge: extra may hold purge_after, api_key, after_cancelled_job_id, ledger_job_id only'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF tokens_only THEN
        PERFORM FROM siwa.users AS u JOIN siwa.apple_tokens AS t ON t.user_id = u.id WHERE u.apple_sub = sub LIMIT 1;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        request := request || jsonb_build_object('scope', 'tokens', 'tokens_before', clock_timestamp());
    END IF;
    INSERT INTO siwa.jobs AS j (kind, args) VALUES ('purge_user', request)
    ON CONFLICT (kind, (args->>'apple_sub')) WHERE kind = 'purge_user' AND state IN ('available', 'running', 'retryable')
    DO UPDATE SET args = CASE
        -- A purge due now into one still waiting: the wait ends.
        WHEN siwa.purge_waiting(j.args) AND NOT excluded.args ? 'scope' AND NOT excluded.args ? 'purge_after'
        THEN (j.args - 'purge_after' - 'jti') || jsonb_build_object('event_type', excluded.args->>'event_type')
             || jsonb_strip_nulls(jsonb_build_object('jti', excluded.args->>'jti')) || (excluded.args - 'apple_sub' - 'event_type' - 'jti')
        -- A grace purge into a waiting one (a second revocation): covered.
        WHEN excluded.args ? 'purge_after' AND siwa.purge_waiting(j.args) THEN j.args
        WHEN excluded.args ? 'scope' AND NOT j.args ? 'scope' THEN j.args
        WHEN excluded.args ? 'scope' AND j.state <> 'running' AND j.steps_done = '{}'::jsonb
        THEN (j.args - 'jti') || excluded.args
        WHEN excluded.args ? 'scope' THEN
            CASE WHEN j.args ? 'rerun' THEN j.args
                 ELSE j.args || jsonb_build_object('rerun_tokens', excluded.args - 'apple_sub' - 'scope') END
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

-- A purge job still inside its grace delay (args.purge_after in the future).
CREATE FUNCTION siwa.purge_waiting(args jsonb) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce((args->>'purge_after')::timestamptz > now(), false)
$$;
REVOKE ALL ON FUNCTION siwa.purge_waiting(jsonb) FROM PUBLIC;

-- The purge marked to follow a running sign-out (above) keeps its delay.
CREATE OR REPLACE FUNCTION siwa.enqueue_purge_rerun() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rerun_id bigint;
BEGIN
    INSERT INTO siwa.jobs (kind, args)
    VALUES (NEW.kind, jsonb_build_object('apple_sub', NEW.args->>'apple_sub',
                                         'event_type', NEW.args->'rerun'->>'event_type',
                                         'jti', NEW.args->'rerun'->>'jti', 'rerun_of', NEW.id)
                      || jsonb_strip_nulls(jsonb_build_object('purge_after', NEW.args->'rerun'->'purge_after')))
    ON CONFLICT DO NOTHING
    RETURNING id INTO rerun_id;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('worker', 'job.rerun_enqueued', NEW.args->>'apple_sub',
            jsonb_build_object('job_id', rerun_id, 'after_job_id', NEW.id));
    RETURN NULL;
END $$;

-- A sign-in by a user whose purge waits out its grace delay cancels it
-- (the user tapped "Stop Using" by mistake and came back). Called by
-- siwa.sign_in with the user's row locked. Answers
--   'none'      no waiting purge: sign-in goes on as before;
--   'cancelled' the purge was cancelled (audit row `purge.cancelled`, an app
--               event); if its first run had not revoked the user's old
--               Apple tokens yet, a sign-out takes over that part;
--   'underway'  the purge is running or due: the sign-in must wait for it.
-- SECURITY DEFINER: serve may cancel a waiting purge only this way, never
-- write siwa.jobs itself.
CREATE FUNCTION siwa.cancel_grace_purge(sub text, api_key text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    waiting record;
BEGIN
    SELECT j.id, j.state, j.args, j.steps_done INTO waiting
    FROM siwa.jobs AS j
    WHERE j.kind = 'purge_user' AND j.args->>'apple_sub' = sub AND j.state IN ('available', 'running', 'retryable')
      AND j.args ? 'purge_after'
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 'none';
    END IF;
    IF waiting.state = 'running' OR NOT siwa.purge_waiting(waiting.args) THEN
        RETURN 'underway';
    END IF;
    UPDATE siwa.jobs SET state = 'cancelled', finalized_at = now(), locked_by = NULL, locked_until = NULL
    WHERE id = waiting.id;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('api', 'purge.cancelled', sub,
            jsonb_build_object('job_id', waiting.id, 'reason', 'signed_in_again', 'api_key', api_key,
                               'purge_after', waiting.args->>'purge_after'));
    -- The old tokens are dead at Apple (consent revoked): a sign-out revokes
    -- and deletes those stored before now, unless the waiting job did.
    IF NOT waiting.steps_done ? 'apple.revoke_tokens' THEN
        PERFORM siwa.enqueue_purge(sub, 'consent-revoked', NULL, true, false, jsonb_build_object('after_cancelled_job_id', waiting.id));
    END IF;
    RETURN 'cancelled';
END $$;
REVOKE ALL ON FUNCTION siwa.cancel_grace_purge(text, text) FROM PUBLIC;

-- ----------------------------------------------------------- sign-in --

-- As in sql/006, with two checks before anything is written: an identity
-- token issued at or before the user's last revocation, deletion, purge or
-- ended session answers 'stale_identity_token'; a purge waiting out its
-- grace delay is cancelled (siwa.cancel_grace_purge), one running or due
-- answers 'deletion_in_progress'.
CREATE OR REPLACE FUNCTION siwa.sign_in(
    sub text, current_id bigint, fresh_id bigint, client_id text, email text, is_private_email boolean,
    given_name text, family_name text, real_user_status smallint, signed_in_ms bigint, code bytea, api_key text,
    key_id text, refresh_for_current bytea, access_for_current bytea, refresh_for_fresh bytea, access_for_fresh bytea,
    access_expires_in integer, validation_hours integer,
    OUT outcome text, OUT user_id bigint, OUT is_new_user boolean, OUT user_email text,
    OUT user_is_private_email boolean, OUT user_real_user_status smallint)
LANGUAGE plpgsql AS $$
DECLARE
    found_id bigint;
    found_status text;
    found_purged boolean;
    found_stale_until bigint;
    pending boolean;
    target bigint;
BEGIN
    SELECT u.id, u.status, u.purged_at IS NOT NULL, u.stale_tokens_until_ms
    INTO found_id, found_status, found_purged, found_stale_until
    FROM siwa.users AS u WHERE u.apple_sub = sub FOR UPDATE;
    IF found_id IS NOT NULL THEN
        IF signed_in_ms <= found_stale_until THEN
            outcome := 'stale_identity_token';
            RETURN;
        END IF;
        IF NOT found_purged AND found_id IS DISTINCT FROM current_id THEN
            outcome := 'again';
            RETURN;
        END IF;
        IF siwa.cancel_grace_purge(sub, api_key) = 'underway' THEN
            outcome := 'deletion_in_progress';
            RETURN;
        END IF;
        SELECT EXISTS (SELECT FROM siwa.jobs AS j WHERE j.kind = 'purge_user' AND j.args->>'apple_sub' = sub
                       AND j.state IN ('available', 'running', 'retryable')
                       -- a token-only sign-out, unless a deletion marked it for a rerun
                       AND (NOT j.args ? 'scope' OR j.args ? 'rerun')) INTO pending;
        -- Deleted and not purged (the purge discarded or cancelled): the data must go first.
        IF pending OR (found_status = 'deleted' AND NOT found_purged) THEN
            outcome := 'deletion_in_progress';
            RETURN;
        END IF;
        target := CASE WHEN found_purged THEN fresh_id ELSE found_id END;
    ELSE
        target := fresh_id;
    END IF;

    IF found_id IS NULL THEN
        INSERT INTO siwa.users AS u (id, apple_sub, status, status_event_time, email, is_private_email, email_event_time,
                                     given_name, family_name, real_user_status, last_sign_in_at)
        VALUES (fresh_id, sub, 'active', signed_in_ms, email, is_private_email,
                CASE WHEN email IS NULL THEN NULL ELSE signed_in_ms END, given_name, family_name, real_user_status, now())
        ON CONFLICT (apple_sub) DO NOTHING
        RETURNING u.id, u.email, u.is_private_email, u.real_user_status
        INTO user_id, user_email, user_is_private_email, user_real_user_status;
        IF user_id IS NULL THEN
            -- A concurrent first sign-in of the same user inserted it.
            outcome := 'again';
            RETURN;
        END IF;
        is_new_user := true;
    ELSIF found_purged THEN
        -- Coming back after a purge, with a token issued after it: a new
        -- account on the same row.
        UPDATE siwa.users AS u SET id = fresh_id, status = 'active', status_event_time = signed_in_ms,
            email = sign_in.email, is_private_email = sign_in.is_private_email, email_forwarding_enabled = true,
            email_event_time = signed_in_ms, given_name = sign_in.given_name, family_name = sign_in.family_name,
            real_user_status = sign_in.real_user_status, last_sign_in_at = now(), purged_at = NULL,
            created_at = now(), updated_at = now()
        WHERE u.id = found_id
        RETURNING u.id, u.email, u.is_private_email, u.real_user_status
        INTO user_id, user_email, user_is_private_email, user_real_user_status;
        INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
        VALUES ('api', 'user.account_restarted', sub,
                jsonb_build_object('user_id', fresh_id, 'previous_user_id', found_id, 'previous_status', found_status));
        is_new_user := true;
    ELSE
        UPDATE siwa.users AS u SET status = 'active', status_event_time = signed_in_ms,
            email = coalesce(sign_in.email, u.email),
            is_private_email = coalesce(sign_in.is_private_email, u.is_private_email),
            email_event_time = CASE WHEN sign_in.email IS NULL THEN u.email_event_time
                                    ELSE greatest(u.email_event_time, signed_in_ms) END,
            given_name = coalesce(u.given_name, sign_in.given_name), family_name = coalesce(u.family_name, sign_in.family_name),
            real_user_status = coalesce(sign_in.real_user_status, u.real_user_status),
            last_sign_in_at = now(), updated_at = now()
        WHERE u.id = found_id
        RETURNING u.id, u.email, u.is_private_email, u.real_user_status
        INTO user_id, user_email, user_is_private_email, user_real_user_status;
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
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('api', 'user.signed_in', sub,
            jsonb_build_object('user_id', target, 'api_key', api_key, 'is_new_user', is_new_user, 'client_id', client_id,
                               'refresh_token_stored', refresh_for_current IS NOT NULL OR refresh_for_fresh IS NOT NULL));
    outcome := 'stored';
END $$;

-- ------------------------------------------------ token validation --

-- The answers of the latest validations (valid or invalid_grant; Apple's
-- undecided answers are not counted), the pause's window. Pruned as it
-- grows (siwa.note_token_validation).
CREATE TABLE siwa.token_validation_outcomes (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    invalid_grant boolean NOT NULL,
    at            timestamptz NOT NULL DEFAULT now()
);

-- Validation paused (paused_at set) after too many invalid_grant answers:
-- an incident on Apple's side must not sign every user out. One row.
CREATE TABLE siwa.token_validation_pause (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    paused_at  timestamptz,
    reason     text,
    resumed_at timestamptz,
    resumed_by text
);
INSERT INTO siwa.token_validation_pause DEFAULT VALUES;

-- A valid answer, counted in the window.
CREATE FUNCTION siwa.note_token_validation(invalid_grant boolean) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    noted bigint;
BEGIN
    INSERT INTO siwa.token_validation_outcomes (invalid_grant) VALUES (note_token_validation.invalid_grant)
    RETURNING id INTO noted;
    -- Only the last 100 count; an index range, usually one row.
    DELETE FROM siwa.token_validation_outcomes WHERE id <= noted - 100;
END $$;
REVOKE ALL ON FUNCTION siwa.note_token_validation(boolean) FROM PUBLIC;

-- Apple answered `invalid_grant` for a stored refresh token: the user's
-- session ends. The dead token is deleted, identity tokens issued until now
-- no longer sign the user in, the user stays `active` and nothing is purged:
-- Apple invalidates a refresh token on a password change too, which is no
-- request to erase anyone (a consent revocation comes as its own event).
-- Unless this answer makes more than `pause_percent` of the last 100
-- answers invalid_grant: then validation pauses, and this user keeps their
-- session (the token is due again when validation resumes).
-- Answers 'session_ended', 'paused' (now or already), or 'gone' (the token
-- was replaced or deleted meanwhile).
CREATE FUNCTION siwa.record_invalid_grant(token_user_id bigint, token_client_id text, token bytea, pause_percent integer)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    pause record;
    invalid_count bigint;
    sub text;
BEGIN
    -- One at a time: the window's count and the pause are decided together.
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
    RETURNING u.apple_sub INTO sub;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('worker', 'token.invalid_grant', sub,
            jsonb_build_object('user_id', token_user_id, 'client_id', token_client_id, 'session_ended', true, 'purge', false));
    RETURN 'session_ended';
END $$;
REVOKE ALL ON FUNCTION siwa.record_invalid_grant(bigint, text, bytea, integer) FROM PUBLIC;

-- `siwa tokens resume-validation`: an operator resumes validation after
-- looking into the pause; the window starts afresh. Audited with the
-- operator's database role.
CREATE FUNCTION siwa.resume_token_validation(OUT was_paused boolean, OUT paused_at timestamptz, OUT reason text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    SELECT p.paused_at IS NOT NULL, p.paused_at, p.reason INTO was_paused, paused_at, reason
    FROM siwa.token_validation_pause AS p FOR UPDATE;
    IF NOT was_paused THEN
        RETURN;
    END IF;
    UPDATE siwa.token_validation_pause
    SET paused_at = NULL, reason = NULL, resumed_at = now(), resumed_by = session_user::text;
    DELETE FROM siwa.token_validation_outcomes;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('admin', 'token_validation.resumed', NULL,
            jsonb_build_object('db_user', session_user::text, 'paused_at', siwa.utc_iso(resume_token_validation.paused_at),
                               'reason', resume_token_validation.reason));
END $$;
REVOKE ALL ON FUNCTION siwa.resume_token_validation() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.resume_token_validation() TO siwa_admin;
-- Admins and auditors see whether validation is paused, and why.
GRANT SELECT ON siwa.token_validation_pause TO siwa_admin, siwa_auditor;

-- ------------------------------------------------------- app events --

-- `purge.cancelled` is an app event; `token.invalid_grant` no longer says
-- `consent.revoked` (the session ended; rows written before this migration,
-- which carry `signed_out`, still do on a replay).
CREATE OR REPLACE FUNCTION siwa.app_events_of(action text, details jsonb, job_kind text)
RETURNS TABLE (event_position integer, event_type text) LANGUAGE sql IMMUTABLE AS $$
    SELECT e.event_position, e.event_type
    FROM (VALUES
        (1, CASE action
                WHEN 'notification.recorded' THEN 'apple.' || coalesce(details->>'event_type', 'unknown')
                WHEN 'user.signed_in' THEN 'user.signed_in'
                WHEN 'user.deletion_requested' THEN 'user.deletion_requested'
                WHEN 'token.invalid_grant' THEN 'token.invalid_grant'
                WHEN 'purge.cancelled' THEN 'purge.cancelled'
                WHEN 'job.completed' THEN CASE WHEN job_kind = 'purge_user' THEN 'purge.completed' END
                WHEN 'job.discarded' THEN CASE WHEN job_kind = 'purge_user' THEN 'purge.failed' END
            END),
        (2, CASE WHEN (action = 'notification.recorded' AND details->>'consent_revoked' = 'true')
                   OR (action = 'token.invalid_grant' AND details->>'signed_out' = 'true')
                 THEN 'consent.revoked' END)
    ) AS e(event_position, event_type)
    WHERE e.event_type IS NOT NULL
$$;

DROP TRIGGER audit_log_app_events ON siwa.audit_log;
CREATE TRIGGER audit_log_app_events
    AFTER INSERT ON siwa.audit_log
    FOR EACH ROW WHEN (NEW.action IN ('user.signed_in', 'user.deletion_requested', 'token.invalid_grant', 'purge.cancelled',
                                      'job.completed', 'job.discarded'))
    EXECUTE FUNCTION siwa.enqueue_app_events();

-- What the app receives: as sql/014, plus `purge.cancelled` and the
-- ended session of `token.invalid_grant`.
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
                   'older_than_sign_in', (a.details->>'older_than_sign_in')::boolean)
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

-- `job.scope_widened` rows too (a grace purge into a pending sign-out).
CREATE OR REPLACE FUNCTION siwa.audit_job_widened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('queue', 'job.scope_widened', NEW.args->>'apple_sub',
            jsonb_strip_nulls(jsonb_build_object(
                'job_id', NEW.id, 'kind', NEW.kind, 'event_type', NEW.args->>'event_type',
                'from_scope', OLD.args->>'scope', 'requested_at', siwa.utc_iso(now()),
                'purge_after', NEW.args->'purge_after', 'db_user', session_user::text)));
    RETURN NULL;
END $$;

-- `job.enqueued` rows say when a purge waits out a grace delay.
CREATE OR REPLACE FUNCTION siwa.audit_job_enqueued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('queue', 'job.enqueued', NEW.args->>'apple_sub',
            jsonb_strip_nulls(jsonb_build_object(
                'job_id', NEW.id, 'kind', NEW.kind, 'event_type', NEW.args->>'event_type', 'scope', NEW.args->>'scope',
                'rerun_of', NEW.args->'rerun_of', 'state', NEW.state, 'requested_at', siwa.utc_iso(NEW.created_at),
                'purge_after', NEW.args->'purge_after', 'db_user', session_user::text)));
    RETURN NULL;
END $$;

-- ------------------------------------------------------ audit views --

-- A waiting purge whose wait ends early (an account deletion merged into it,
-- an operator's `siwa jobs run-now`) says so: its SLA runs from then.
CREATE FUNCTION siwa.audit_job_wait_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('queue', 'job.wait_ended', NEW.args->>'apple_sub',
            jsonb_build_object('job_id', NEW.id, 'kind', NEW.kind, 'purge_after', OLD.args->'purge_after',
                               'event_type', NEW.args->>'event_type', 'db_user', session_user::text));
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_audit_wait_ended
    AFTER UPDATE OF args ON siwa.jobs
    FOR EACH ROW WHEN (OLD.args ? 'purge_after' AND NOT NEW.args ? 'purge_after')
    EXECUTE FUNCTION siwa.audit_job_wait_ended();

-- Each purge request with the moment it became due: its grace delay's end,
-- or when that wait ended early; the request itself for every other purge.
-- Latency and the SLA are measured from it.
CREATE OR REPLACE VIEW siwa.purge_requests AS
    SELECT a.seq, a.apple_sub, (a.details->>'job_id')::bigint AS job_id, a.details->>'event_type' AS event_type,
           (a.details->>'requested_at')::timestamptz AS requested_at,
           coalesce(least((a.details->>'purge_after')::timestamptz,
                          (SELECT min(w.occurred_at) FROM siwa.audit_log AS w
                           WHERE w.apple_sub = a.apple_sub AND w.action = 'job.wait_ended'
                             AND w.details->>'job_id' = a.details->>'job_id')),
                    (a.details->>'requested_at')::timestamptz) AS due_at
    FROM siwa.audit_log AS a
    WHERE a.action IN ('job.enqueued', 'job.scope_widened') AND a.details->>'kind' = 'purge_user' AND NOT a.details ? 'scope';

CREATE OR REPLACE VIEW siwa.purge_latency AS
    SELECT r.apple_sub, r.job_id, r.event_type, r.requested_at, done.completed_at,
           extract(epoch FROM done.completed_at - r.due_at)::double precision AS seconds,
           CASE WHEN done.completed_at IS NOT NULL THEN 'completed' ELSE coalesce(j.state, 'cancelled') END AS state,
           r.due_at
    FROM siwa.purge_requests AS r
    LEFT JOIN LATERAL (SELECT min(a.occurred_at) AS completed_at FROM siwa.audit_log AS a
                       WHERE a.apple_sub = r.apple_sub AND a.action = 'job.completed'
                         AND a.details->>'job_id' = r.job_id::text) AS done ON true
    LEFT JOIN siwa.jobs AS j ON j.id = r.job_id;

CREATE OR REPLACE VIEW siwa.daily_summary AS
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
               extract(epoch FROM c.occurred_at - r.due_at)::double precision
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

-- A purge waiting out its grace delay is not late: the SLA runs from its due time.
CREATE OR REPLACE VIEW siwa.attention AS
    SELECT j.id AS job_id, j.args->>'apple_sub' AS apple_sub, j.state, j.attempt,
           failure.last_error,
           CASE WHEN j.state = 'discarded' THEN coalesce(j.finalized_at, j.created_at)
                ELSE coalesce((j.args->>'purge_after')::timestamptz, j.created_at) END AS since
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

-- Consent revocations' purges waiting out their grace delay: the user's
-- data is still there until `due_at`, unless they sign in again first.
-- `siwa audit summary`, the admin page (with a Run now button) and the
-- auditors read it; no args beyond the Apple sub.
CREATE VIEW siwa.waiting_purges AS
    SELECT j.id AS job_id, j.args->>'apple_sub' AS apple_sub, j.created_at AS requested_at,
           (j.args->>'purge_after')::timestamptz AS due_at
    FROM siwa.jobs AS j
    WHERE j.kind = 'purge_user' AND j.state IN ('available', 'retryable', 'running')
      AND (j.args->>'purge_after')::timestamptz > now();
GRANT SELECT ON siwa.waiting_purges TO siwa_auditor, siwa_admin;

-- ------------------------------------------------------------ grants --

INSERT INTO siwa.runtime_grants (migration, position, why, statement) VALUES
    (15, 1, 'sign-in cancels a purge waiting out its grace delay (serve); only through this function',
        'GRANT EXECUTE ON FUNCTION siwa.cancel_grace_purge(text, text) TO %I'),
    (15, 2, 'the worker''s validation counts answers and ends sessions on invalid_grant, pausing past the limit',
        'GRANT EXECUTE ON FUNCTION siwa.note_token_validation(boolean), siwa.record_invalid_grant(bigint, text, bytea, integer) TO %I'),
    (15, 3, 'the worker checks whether validation is paused',
        'GRANT SELECT ON siwa.token_validation_pause TO %I'),
    (15, 4, 'siwa.enqueue_purge and siwa.sign_in ask whether a purge waits out its grace delay',
        'GRANT EXECUTE ON FUNCTION siwa.purge_waiting(jsonb) TO %I'),
    (15, 5, 'the admin page lists the purges that wait out a grace delay',
        'GRANT SELECT ON siwa.waiting_purges TO %I');
