-- One home for how a purge, or a token-only sign-out, is enqueued and
-- merged into a user's pending `purge_user` job (the inbox statement, the
-- in-app deletion and the token validator each wrote it their own way), and
-- the token-only sign-out made exact under concurrent sign-ins.

-- A token row's stored_at is the moment it was written, which is after the
-- writer (siwa.sign_in) locked the user's row: it orders with the moments
-- recorded under the same lock (a sign-out's `tokens_before`, below). The
-- column's default, now(), is the writer's transaction start, which can
-- come before a consent revocation that it then waited for.
CREATE FUNCTION siwa.stamp_token_stored_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.stored_at := clock_timestamp();
    RETURN NEW;
END $$;

CREATE TRIGGER apple_tokens_stored_at
    BEFORE INSERT OR UPDATE OF stored_at ON siwa.apple_tokens
    FOR EACH ROW EXECUTE FUNCTION siwa.stamp_token_stored_at();

-- siwa.enqueue_purge: a purge of the user's data (tokens_only false), or a
-- token-only sign-out (args.scope 'tokens': a consent revocation under
-- SIWA_ON_CONSENT_REVOKED=sign_out revokes and deletes the user's Apple
-- tokens and keeps the rest). Answers the job enqueued or merged into
-- (job_id NULL: a sign-out with no token to revoke, nothing enqueued).
--
-- Call it with the user's row locked (or just written) by the calling
-- statement: plpgsql runs each statement below on a snapshot of its own
-- (READ COMMITTED), so it sees the tokens of a sign-in that committed while
-- the caller waited for that lock, where the caller's own snapshot would
-- not. A sign-out's `tokens_before` is taken here too, after the lock: its
-- job revokes the tokens stored before it (every one this call saw), and
-- leaves those of a sign-in that came after it (stored_at, above).
--
-- `renotify`: whether a purge merged into a pending purge makes the job
-- tell the downstream of this event (Apple's notifications: the downstream
-- hears of the latest event); siwa's own requests (an in-app deletion, a
-- token Apple calls invalid_grant) leave a pending purge as it is.
-- `extra`: more args for a job this call creates (the API key's name).
CREATE FUNCTION siwa.enqueue_purge(sub text, event_type text, jti text, tokens_only boolean, renotify boolean,
    extra jsonb DEFAULT '{}', OUT job_id bigint, OUT job_state text, OUT inserted boolean)
LANGUAGE plpgsql AS $$
DECLARE
    request jsonb := jsonb_build_object('apple_sub', sub, 'event_type', event_type)
                     || jsonb_strip_nulls(jsonb_build_object('jti', jti)) || extra;
BEGIN
    IF tokens_only THEN
        PERFORM FROM siwa.users AS u JOIN siwa.apple_tokens AS t ON t.user_id = u.id WHERE u.apple_sub = sub LIMIT 1;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        request := request || jsonb_build_object('scope', 'tokens', 'tokens_before', clock_timestamp());
    END IF;
    INSERT INTO siwa.jobs AS j (kind, args) VALUES ('purge_user', request)
    ON CONFLICT (kind, (args->>'apple_sub')) WHERE kind = 'purge_user' AND state IN ('available', 'running', 'retryable')
    -- One pending job per user. Whether it has started matters: one that
    -- is running, or retrying with steps done, may have passed steps this
    -- request needs again, so it gets a mark, and its completion enqueues
    -- a fresh job (triggers jobs_purge_rerun, 002, and jobs_tokens_rerun,
    -- below). One that has not started simply covers the request.
    DO UPDATE SET args = CASE
        -- A sign-out into a pending purge: every purge revokes every token,
        -- and siwa.sign_in stores none while a purge is pending.
        WHEN excluded.args ? 'scope' AND NOT j.args ? 'scope' THEN j.args
        -- A sign-out into a pending sign-out that has not started: it now
        -- revokes the tokens stored before this later revocation too (a
        -- sign-in between the two may have stored some).
        WHEN excluded.args ? 'scope' AND j.state <> 'running' AND j.steps_done = '{}'::jsonb
        THEN (j.args - 'jti') || excluded.args
        -- ...into one that is running (it may have read the tokens already):
        -- a sign-out for the tokens stored since follows it, unless a whole
        -- purge is marked to follow it already.
        WHEN excluded.args ? 'scope' THEN
            CASE WHEN j.args ? 'rerun' THEN j.args
                 ELSE j.args || jsonb_build_object('rerun_tokens', excluded.args - 'apple_sub' - 'scope') END
        -- A purge into a pending sign-out: the job becomes this purge, or,
        -- once started, is marked for this purge to follow it.
        WHEN j.args ? 'scope' AND j.state <> 'running' AND j.steps_done = '{}'::jsonb
        THEN (j.args - 'scope' - 'tokens_before' - 'jti' - 'rerun_tokens') || excluded.args
        WHEN j.args ? 'scope' THEN
            j.args || jsonb_build_object('rerun', jsonb_build_object('event_type', excluded.args->>'event_type',
                                                                     'jti', excluded.args->>'jti'))
        -- A purge into a pending purge: it erases the same data.
        WHEN NOT renotify THEN j.args
        WHEN j.state = 'running' OR j.steps_done <> '{}'::jsonb THEN
            j.args || jsonb_build_object('rerun', jsonb_build_object('event_type', excluded.args->>'event_type',
                                                                     'jti', excluded.args->>'jti'))
        ELSE j.args || jsonb_build_object('event_type', excluded.args->>'event_type', 'jti', excluded.args->>'jti')
        END
    -- xmax = 0 only on a freshly inserted row version (PostgreSQL's usual
    -- way to tell the two ON CONFLICT outcomes apart).
    RETURNING j.id, j.state, j.xmax = 0 INTO job_id, job_state, inserted;
END $$;
REVOKE ALL ON FUNCTION siwa.enqueue_purge(text, text, text, boolean, boolean, jsonb) FROM PUBLIC;

-- A sign-out marked while it ran (rerun_tokens, above) is followed by a
-- sign-out for the tokens stored before the later revocation, in the same
-- transaction as the completion, so it cannot be lost. (A whole purge
-- marked to follow, args.rerun, covers the tokens: jobs_purge_rerun.)
CREATE FUNCTION siwa.enqueue_tokens_rerun() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rerun_id bigint;
BEGIN
    INSERT INTO siwa.jobs (kind, args)
    VALUES (NEW.kind, jsonb_build_object('apple_sub', NEW.args->>'apple_sub', 'scope', 'tokens', 'rerun_of', NEW.id)
                      || (NEW.args->'rerun_tokens'))
    ON CONFLICT DO NOTHING
    RETURNING id INTO rerun_id;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('worker', 'job.rerun_enqueued', NEW.args->>'apple_sub',
            jsonb_build_object('job_id', rerun_id, 'after_job_id', NEW.id, 'scope', 'tokens'));
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_tokens_rerun
    AFTER UPDATE OF state ON siwa.jobs
    FOR EACH ROW WHEN (NEW.state = 'completed' AND OLD.state <> 'completed'
                       AND NEW.args ? 'rerun_tokens' AND NOT NEW.args ? 'rerun')
    EXECUTE FUNCTION siwa.enqueue_tokens_rerun();

-- The earlier answer to a retried sign-in (the same authorization code
-- within the window): one lookup, used by siwa.sign_in_prepare and by a
-- sign-in whose code Apple refused as used (SignInStore.replay).
CREATE FUNCTION siwa.sign_in_replay(code bytea, replay_window_seconds integer,
    OUT user_id bigint, OUT apple_sub text, OUT is_new_user boolean, OUT refresh_token_stored boolean)
RETURNS SETOF record LANGUAGE sql STABLE AS $$
    SELECT c.user_id, c.apple_sub, c.is_new_user, c.refresh_token_stored
    FROM siwa.sign_in_codes AS c
    WHERE c.code_sha256 = code AND c.created_at > now() - make_interval(secs => replay_window_seconds)
$$;
REVOKE ALL ON FUNCTION siwa.sign_in_replay(bytea, integer) FROM PUBLIC;

-- As in 006, the code's lookup now siwa.sign_in_replay's.
CREATE OR REPLACE FUNCTION siwa.sign_in_prepare(sub text, code bytea, replay_window_seconds integer,
    OUT current_id bigint, OUT fresh_id bigint, OUT replay_user_id bigint, OUT replay_sub text,
    OUT replay_is_new boolean, OUT replay_stored boolean)
LANGUAGE sql AS $$
    SELECT (SELECT id FROM siwa.users WHERE apple_sub = sub),
           nextval(pg_get_serial_sequence('siwa.users', 'id')),
           r.user_id, r.apple_sub, r.is_new_user, r.refresh_token_stored
    FROM (SELECT 1) AS one
    LEFT JOIN siwa.sign_in_replay(code, replay_window_seconds) AS r ON true
$$;

INSERT INTO siwa.runtime_grants (migration, position, why, statement) VALUES
    (8, 1, 'the inbox statement, in-app deletion and token validation enqueue purges and sign-outs',
        'GRANT EXECUTE ON FUNCTION siwa.enqueue_purge(text, text, text, boolean, boolean, jsonb) TO %I'),
    (8, 2, 'a sign-in whose code Apple refused as used looks for the earlier answer',
        'GRANT EXECUTE ON FUNCTION siwa.sign_in_replay(bytea, integer) TO %I');
