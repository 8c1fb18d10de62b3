-- Naming a user on the command line, `siwa users show|delete`, and the
-- admin page's lookup by email address (issue 22 §5, §6).

-- A user as admins and auditors may see them: the sub, its team, the
-- account's state and dates, whether siwa holds an email address and
-- tokens, never the address, a name, the org id or a token. `siwa users
-- show`, and the team a sub given on the command line is in.
CREATE VIEW siwa.user_directory AS
    SELECT u.id AS user_id, u.apple_sub, u.apple_team, u.client_id, u.status, u.created_at, u.updated_at,
           u.last_sign_in_at, u.purged_at, u.email IS NOT NULL AS has_email, u.transfer_state,
           (SELECT count(*) FROM siwa.apple_tokens AS t WHERE t.user_id = u.id) AS tokens,
           (SELECT max(t.last_validated_at) FROM siwa.apple_tokens AS t WHERE t.user_id = u.id) AS tokens_validated_at
    FROM siwa.users AS u
    WHERE u.apple_sub IS NOT NULL;
GRANT SELECT ON siwa.user_directory TO siwa_admin, siwa_auditor;

-- A user's deletion, one for DELETE /v1/users/{sub} and `siwa users
-- delete`: the account marked deleted and its purge enqueued (merged with a
-- pending one, as for Apple's deletion events), audited
-- `user.deletion_requested` by `acting`, in one statement. A user already
-- purged gets the purge that did it (job 0, `pruned`, once the queue
-- pruned it), and nothing is written. Called by the two functions below only.
CREATE FUNCTION siwa.delete_user_as(target_sub text, target_team text, acting text, acting_details jsonb, purge_extra jsonb,
    OUT user_found boolean, OUT job_id bigint, OUT job_state text, OUT will_revoke boolean, OUT already_purged boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    target record;
    queued record;
BEGIN
    user_found := false;
    will_revoke := false;
    already_purged := false;
    -- The lock first (as siwa.sign_in takes it), then a user already
    -- purged gets the purge that did it, not another.
    SELECT u.id, u.status, u.status = 'deleted' AND u.purged_at IS NOT NULL AS purged INTO target
    FROM siwa.users AS u WHERE u.apple_sub = target_sub AND u.apple_team = target_team
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    user_found := true;
    IF target.purged THEN
        already_purged := true;
        SELECT j.id, j.state INTO job_id, job_state FROM siwa.jobs AS j
        WHERE j.kind = 'purge_user' AND NOT j.args ? 'scope'
          AND j.args->>'apple_sub' = target_sub AND j.args->>'apple_team' = target_team
        ORDER BY j.id DESC LIMIT 1;
        IF NOT FOUND THEN
            -- Pruned after SIWA_JOB_RETENTION_DAYS: the audit trail keeps it.
            job_id := 0;
            job_state := 'pruned';
        END IF;
        RETURN;
    END IF;
    UPDATE siwa.users SET status = 'deleted', status_event_time = (extract(epoch FROM now()) * 1000)::bigint, updated_at = now()
    WHERE id = target.id AND status <> 'deleted';
    SELECT * INTO queued FROM siwa.enqueue_purge(target_sub, target_team, 'app-deletion', NULL, false, false, purge_extra);
    job_id := queued.job_id;
    job_state := queued.job_state;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
    VALUES (acting, 'user.deletion_requested', target_sub, target_team,
            jsonb_build_object('user_id', target.id, 'job_id', job_id, 'merged', NOT queued.inserted,
                               'previous_status', target.status) || acting_details);
    will_revoke := EXISTS (SELECT FROM siwa.apple_tokens AS t WHERE t.user_id = target.id);
END $$;
REVOKE ALL ON FUNCTION siwa.delete_user_as(text, text, text, jsonb, jsonb) FROM PUBLIC;

-- DELETE /v1/users/{sub} (serve, as the runtime role), for the API key
-- named: actor `api`, details and the job's args `api_key`.
CREATE FUNCTION siwa.delete_user_for_api(target_sub text, target_team text, api_key text,
    OUT user_found boolean, OUT job_id bigint, OUT job_state text, OUT will_revoke boolean, OUT already_purged boolean)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM siwa.delete_user_as(target_sub, target_team, 'api', jsonb_build_object('api_key', api_key),
                                      jsonb_build_object('api_key', api_key))
$$;
REVOKE ALL ON FUNCTION siwa.delete_user_for_api(text, text, text) FROM PUBLIC;

-- `siwa users delete SUB` as an admin's own role (a member of siwa_admin):
-- actor `admin`, details `admin` and `db_user` (the role) and `login_hint`
-- (the caller's login name: a hint only).
CREATE FUNCTION siwa.delete_user(target_sub text, target_team text, login_hint text,
    OUT user_found boolean, OUT job_id bigint, OUT job_state text, OUT will_revoke boolean, OUT already_purged boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF target_sub IS NULL OR target_sub !~ '^[[:graph:]]{1,255}$' THEN
        RAISE EXCEPTION 'an Apple sub is 1 to 255 printable characters without spaces' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF target_team IS NULL OR target_team !~ '^[A-Z0-9]{10}$' THEN
        RAISE EXCEPTION 'a team id is 10 upper-case letters and digits' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT d.user_found, d.job_id, d.job_state, d.will_revoke, d.already_purged
    INTO user_found, job_id, job_state, will_revoke, already_purged
    FROM siwa.delete_user_as(target_sub, target_team, 'admin',
                             jsonb_build_object('admin', session_user::text, 'db_user', session_user::text,
                                                'login_hint', left(login_hint, 64)), '{}') AS d;
END $$;
REVOKE ALL ON FUNCTION siwa.delete_user(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.delete_user(text, text, text) TO siwa_admin;

-- Support requests arrive by email: the admin page finds the active users
-- with exactly this address (compared without regard to case), for a live
-- admin key. Audited `user.looked_up`, one row per user found (one without
-- a sub when none was), naming the key; the address itself is kept nowhere
-- (neither it nor a hash of it: a hash of an address is found again by
-- hashing guesses).
CREATE INDEX users_active_email_idx ON siwa.users (lower(email)) WHERE status = 'active' AND email IS NOT NULL;

CREATE FUNCTION siwa.find_user_by_email_by_key(address text, acting_key bigint)
RETURNS TABLE (found_sub text, found_team text, found_user_id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    key_name text;
BEGIN
    SELECT k.name INTO key_name FROM siwa.api_keys AS k
    WHERE k.id = acting_key AND k.scope = 'admin' AND k.revoked_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'API key % is not a live admin key', acting_key USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF address IS NULL OR length(address) NOT BETWEEN 3 AND 320 OR position('@' IN address) = 0 THEN
        RAISE EXCEPTION 'an email address is 3 to 320 characters with an @' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH hit AS MATERIALIZED (
        SELECT u.apple_sub AS sub, u.apple_team AS team, u.id FROM siwa.users AS u
        WHERE lower(u.email) = lower(address) AND u.status = 'active' AND u.email IS NOT NULL AND u.apple_sub IS NOT NULL
        ORDER BY u.apple_team, u.apple_sub
        LIMIT 20
    ), counted AS (
        SELECT count(*) AS n FROM hit
    ), audit_hits AS (
        INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
        SELECT 'admin_key:' || key_name, 'user.looked_up', hit.sub, hit.team,
               jsonb_build_object('by', 'email', 'found', counted.n, 'user_id', hit.id, 'api_key', key_name,
                                  'api_key_id', acting_key, 'via', 'admin_http')
        FROM hit, counted
    ), audit_miss AS (
        INSERT INTO siwa.audit_log (actor, action, details)
        SELECT 'admin_key:' || key_name, 'user.looked_up',
               jsonb_build_object('by', 'email', 'found', 0, 'api_key', key_name, 'api_key_id', acting_key, 'via', 'admin_http')
        FROM counted WHERE counted.n = 0
    )
    SELECT hit.sub, hit.team, hit.id FROM hit ORDER BY hit.team, hit.sub;
END $$;
REVOKE ALL ON FUNCTION siwa.find_user_by_email_by_key(text, bigint) FROM PUBLIC;

INSERT INTO siwa.runtime_grants (migration, position, process, why, statement) VALUES
    (25, 1, 'serve', 'DELETE /v1/users/{sub}: the deletion siwa users delete makes, as the API key',
        'GRANT EXECUTE ON FUNCTION siwa.delete_user_for_api(text, text, text) TO %I'),
    (25, 2, 'serve', 'the admin page finds an active user by email address for a live admin key (audited user.looked_up)',
        'GRANT EXECUTE ON FUNCTION siwa.find_user_by_email_by_key(text, bigint) TO %I'),
    (25, 3, 'worker', 'siwa tokens validate|forget (the worker''s role) find the team of the sub they are given',
        'GRANT SELECT ON siwa.user_directory TO %I');
