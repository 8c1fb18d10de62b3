-- App transfer between teams (issue 21, §2; Apple's TN3159, quoted in
-- docs/apple-sources.md §8): a user's `sub` is team-scoped, so when the app
-- moves to another developer team every user gets a new one (and a user of
-- Hide My Email a new relay address). The sending team asks Apple, for each
-- user, a `transfer_sub` toward the receiving team (`siwa transfer
-- prepare`); the receiving team exchanges each `transfer_sub` for the
-- user's new `sub` (`siwa transfer complete`), or reads it from an identity
-- token's `transfer_sub` claim when the user signs in first. Both within
-- Apple's 60 days. docs/app-transfer.md is the operator's procedure.
--
-- * The state lives on the user: `transfer_sub` (sql/022's
--   `token_transfer_sub`, renamed: the identity token's claim and the prepare
--   step's answer are the same identifier, toward the same team), the team
--   it is for, the phase (`prepare`: asking for the transfer_sub;
--   `complete`: exchanging it for the new sub) and its state (pending,
--   done, failed), Apple's last answer when it was not a success, and the
--   calls made.
-- * A user imported from another siwa (`siwa transfer import`) has no sub
--   until it completes: the one row of siwa.users without one.
-- * Each move keeps the user's id and data, writes `user.transferred` (old
--   and new sub, no email, no name; an app event), and leaves a row in
--   siwa.user_moves, which `GET /v1/users/{old_sub}` answers for 60 days.
-- * The calls to Apple are jobs (`transfer_prepare`, `transfer_complete`,
--   one per user), so a killed worker loses nothing and a rerun skips the
--   users done. Admins start, read and export through the functions below
--   (SECURITY DEFINER, audited); the worker and serve move users only through
--   siwa.complete_user_transfer and siwa.link_transferred_sign_in.

-- ------------------------------------------------------------- the state --

ALTER TABLE siwa.users RENAME COLUMN token_transfer_sub TO transfer_sub;
ALTER TABLE siwa.users
    -- The team `transfer_sub` is for (the receiving team's id).
    ADD COLUMN transfer_team       text,
    ADD COLUMN transfer_phase      text CHECK (transfer_phase IN ('prepare', 'complete')),
    ADD COLUMN transfer_state      text CHECK (transfer_state IN ('pending', 'done', 'failed')),
    -- Apple's last answer that was not a success: a status and Apple's
    -- error code, or siwa's reason (never a token, an email or a name).
    ADD COLUMN transfer_reason     text,
    ADD COLUMN transfer_attempts   integer NOT NULL DEFAULT 0,
    ADD COLUMN transfer_updated_at timestamptz,
    ADD CONSTRAINT users_transfer_phase_state CHECK ((transfer_phase IS NULL) = (transfer_state IS NULL)),
    ALTER COLUMN apple_sub DROP NOT NULL,
    -- Only an imported user awaiting completion has no sub.
    ADD CONSTRAINT users_sub_unless_awaiting CHECK (apple_sub IS NOT NULL
                                                    OR (transfer_phase = 'complete' AND transfer_state <> 'done'));

-- Apple maps a team's user to one transfer_sub per receiving team: two rows
-- with the same pair would be one person twice (an import run twice).
CREATE UNIQUE INDEX users_transfer_sub_idx ON siwa.users (transfer_team, transfer_sub)
    WHERE transfer_team IS NOT NULL AND transfer_sub IS NOT NULL;
-- The status's counts and the start functions' scans.
CREATE INDEX users_transfer_idx ON siwa.users (transfer_team, transfer_phase, transfer_state)
    WHERE transfer_phase IS NOT NULL;

-- One transfer job per user, kind and team while pending: a rerun enqueues
-- none twice (a job left for another team completes without a call).
CREATE UNIQUE INDEX jobs_transfer_pending_idx ON siwa.jobs (kind, (args->>'user_id'), (args->>'team'))
    WHERE kind IN ('transfer_prepare', 'transfer_complete') AND state IN ('available', 'running', 'retryable');

-- Each move: the old sub's new one, for `GET /v1/users/{old_sub}`
-- ("moved_to", within 60 days). An imported user had no old sub here.
CREATE TABLE siwa.user_moves (
    old_sub  text PRIMARY KEY,
    new_sub  text NOT NULL,
    user_id  bigint NOT NULL,
    moved_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT ON siwa.user_moves TO siwa_admin;

-- ------------------------------------------------------------- the move --

-- Moves user `moved_user` to `new_sub` in place (same id, same data), if it
-- awaits completion of a transfer toward `expected_team` with
-- `expected_transfer_sub`: prepared here (phase prepare, done) or imported
-- (phase complete, pending or failed). With `new_email`, Apple's relay
-- address for the new team replaces the stored one. Writes the move, the
-- `user.transferred` audit row (and so its app event) as `acting`.
-- Outcomes: moved; already_done (nothing written); not_awaiting; deleted,
-- sub_taken (the user's transfer marked failed with the reason). Called
-- only by the two functions after it.
CREATE FUNCTION siwa.move_transferred_user_as(acting text, via text, moved_user bigint, expected_transfer_sub text,
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
    SELECT u.id INTO holder FROM siwa.users AS u WHERE u.apple_sub = new_sub AND u.id <> moved_user;
    IF holder IS NOT NULL THEN
        UPDATE siwa.users AS u SET transfer_phase = 'complete', transfer_state = 'failed',
            transfer_reason = 'the new sub belongs to siwa user ' || holder || ' already (signed in before the transfer completed)',
            transfer_updated_at = now()
        WHERE u.id = moved_user;
        RETURN 'sub_taken';
    END IF;
    UPDATE siwa.users AS u SET apple_sub = new_sub,
        email = coalesce(new_email, u.email),
        is_private_email = CASE WHEN new_email IS NULL THEN u.is_private_email ELSE coalesce(new_is_private, true) END,
        email_verified = CASE WHEN new_email IS NULL THEN u.email_verified ELSE true END,
        transfer_phase = 'complete', transfer_state = 'done', transfer_reason = NULL, transfer_updated_at = now(),
        updated_at = now()
    WHERE u.id = moved_user;
    IF moving.apple_sub IS NOT NULL AND moving.apple_sub <> new_sub THEN
        INSERT INTO siwa.user_moves AS m (old_sub, new_sub, user_id) VALUES (moving.apple_sub, new_sub, moved_user)
        ON CONFLICT (old_sub) DO UPDATE SET new_sub = excluded.new_sub, user_id = excluded.user_id, moved_at = now();
    END IF;
    -- Subs and ids only: no email, no name.
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES (acting, 'user.transferred', new_sub,
            jsonb_build_object('user_id', moved_user, 'old_sub', moving.apple_sub, 'new_sub', new_sub,
                               'team', expected_team, 'via', via, 'imported', moving.apple_sub IS NULL));
    RETURN 'moved';
END $$;
REVOKE ALL ON FUNCTION siwa.move_transferred_user_as(text, text, bigint, text, text, text, text, boolean) FROM PUBLIC;

-- The worker's `transfer_complete` job, with Apple's answer to the exchange.
CREATE FUNCTION siwa.complete_user_transfer(moved_user bigint, expected_transfer_sub text, expected_team text, new_sub text,
                                            new_email text, new_is_private boolean)
RETURNS text LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT siwa.move_transferred_user_as('worker', 'usermigrationinfo', moved_user, expected_transfer_sub, expected_team,
                                         new_sub, new_email, new_is_private)
$$;
REVOKE ALL ON FUNCTION siwa.complete_user_transfer(bigint, text, text, text, text, boolean) FROM PUBLIC;

-- Sign-in (siwa.sign_in, as serve): an identity token whose `transfer_sub`
-- is a user's awaiting completion, for a `sub` no user has, moves that user
-- to the token's sub on the spot (Apple: "Use the transfer identifier to
-- correlate the Sign in with Apple user in the data records migrated from
-- the previous owner"). True when a user moved.
CREATE FUNCTION siwa.link_transferred_sign_in(token_transfer_sub text, token_sub text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    awaiting siwa.users;
BEGIN
    SELECT * INTO awaiting FROM siwa.users AS u
    WHERE u.transfer_sub = token_transfer_sub
      AND ((u.transfer_phase = 'prepare' AND u.transfer_state = 'done')
           OR (u.transfer_phase = 'complete' AND u.transfer_state IN ('pending', 'failed')))
    ORDER BY u.id LIMIT 1;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    RETURN siwa.move_transferred_user_as('api', 'sign_in', awaiting.id, token_transfer_sub, awaiting.transfer_team,
                                         token_sub, NULL, NULL) = 'moved';
END $$;
REVOKE ALL ON FUNCTION siwa.link_transferred_sign_in(text, text) FROM PUBLIC;

-- ------------------------------------------------------- what admins call --

-- `siwa transfer prepare --to TEAM`: every user who can move (not deleted,
-- not purged, with a sub, not awaiting the completion of a transfer here)
-- and is not prepared for `target` yet is set pending and gets a
-- `transfer_prepare` job. Refused when
-- `target` is no team id or is the team the app is in.
CREATE FUNCTION siwa.start_transfer_prepare(target text, source_team text, transfer_client text, login_hint text,
                                            OUT users_pending bigint, OUT users_done bigint, OUT jobs_enqueued bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF target IS NULL OR target !~ '^[A-Z0-9]{10}$' THEN
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
    WHERE u.apple_sub IS NOT NULL AND u.purged_at IS NULL AND u.status <> 'deleted'
      -- not in the middle of a transfer to this siwa (a user moved by an
      -- earlier one may move on), nor prepared for `target` already
      AND NOT coalesce(u.transfer_phase = 'complete' AND u.transfer_state <> 'done', false)
      AND NOT coalesce(u.transfer_phase = 'prepare' AND u.transfer_team = target AND u.transfer_state = 'done', false);
    WITH queued AS (
        INSERT INTO siwa.jobs (kind, args)
        SELECT 'transfer_prepare', jsonb_build_object('apple_sub', u.apple_sub, 'user_id', u.id, 'team', target,
                                                      'client_id', transfer_client)
        FROM siwa.users AS u
        WHERE u.transfer_team = target AND u.transfer_phase = 'prepare' AND u.transfer_state = 'pending'
          AND NOT EXISTS (SELECT FROM siwa.jobs AS j WHERE j.kind = 'transfer_prepare' AND j.args->>'user_id' = u.id::text
                          AND j.args->>'team' = target AND j.state IN ('available', 'running', 'retryable'))
        ORDER BY u.id
        RETURNING 1
    )
    SELECT count(*) INTO jobs_enqueued FROM queued;
    SELECT count(*) FILTER (WHERE u.transfer_state = 'pending'), count(*) FILTER (WHERE u.transfer_state = 'done')
    INTO users_pending, users_done
    FROM siwa.users AS u WHERE u.transfer_team = target AND u.transfer_phase = 'prepare';
    INSERT INTO siwa.audit_log (actor, action, details)
    VALUES ('admin', 'transfer.prepare_started',
            jsonb_build_object('target_team', target, 'source_team', source_team, 'client_id', transfer_client,
                               'users_pending', users_pending, 'users_done', users_done, 'jobs_enqueued', jobs_enqueued,
                               'db_user', session_user::text, 'login_hint', left(login_hint, 64)));
END $$;
REVOKE ALL ON FUNCTION siwa.start_transfer_prepare(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.start_transfer_prepare(text, text, text, text) TO siwa_admin;

-- `siwa transfer complete`, with the settings naming the receiving team
-- (`team`): every user awaiting completion toward it (prepared here, or
-- imported; failed ones again) is set pending and gets a
-- `transfer_complete` job. Refused when no user awaits a transfer to `team`.
CREATE FUNCTION siwa.start_transfer_complete(team text, transfer_client text, login_hint text,
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
        SELECT 'transfer_complete', jsonb_build_object('apple_sub', u.apple_sub, 'user_id', u.id, 'team', team,
                                                       'client_id', transfer_client)
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
REVOKE ALL ON FUNCTION siwa.start_transfer_complete(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.start_transfer_complete(text, text, text) TO siwa_admin;

-- `siwa transfer status`: users by team, phase and state, with Apple's
-- last answer (no sub, no email: counts only).
CREATE FUNCTION siwa.transfer_status()
RETURNS TABLE (team text, phase text, state text, reason text, users bigint)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT u.transfer_team, u.transfer_phase, u.transfer_state, u.transfer_reason, count(*)
    FROM siwa.users AS u WHERE u.transfer_phase IS NOT NULL
    GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4 NULLS FIRST
$$;
REVOKE ALL ON FUNCTION siwa.transfer_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.transfer_status() TO siwa_admin;

-- `siwa transfer export FILE`: each prepared user's siwa id and transfer_sub
-- toward `target`, nothing else (Apple: "include only the transfer
-- identifier to identify the user"), audited. Refused while a user is
-- pending, or failed unless `skip_failed`, or when nothing is prepared.
CREATE FUNCTION siwa.export_transfer(target text, skip_failed boolean, login_hint text)
RETURNS TABLE (user_id bigint, transfer_sub text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    pending bigint;
    failed bigint;
    done bigint;
BEGIN
    SELECT count(*) FILTER (WHERE u.transfer_state = 'pending'), count(*) FILTER (WHERE u.transfer_state = 'failed'),
           count(*) FILTER (WHERE u.transfer_state = 'done')
    INTO pending, failed, done
    FROM siwa.users AS u WHERE u.transfer_team = target AND u.transfer_phase = 'prepare';
    IF done = 0 AND pending = 0 AND failed = 0 THEN
        RAISE EXCEPTION 'nothing is prepared for team %: run siwa transfer prepare --to % first', target, target
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF pending > 0 THEN
        RAISE EXCEPTION '% users are still pending: wait until siwa transfer status shows none pending', pending
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF failed > 0 AND NOT skip_failed THEN
        RAISE EXCEPTION '% users failed (siwa transfer status shows Apple''s answers): fix and run siwa transfer prepare again, or export without them (--skip-failed)', failed
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    INSERT INTO siwa.audit_log (actor, action, details)
    VALUES ('admin', 'transfer.exported',
            jsonb_build_object('target_team', target, 'users', done, 'skipped_failed', failed,
                               'db_user', session_user::text, 'login_hint', left(login_hint, 64)));
    RETURN QUERY SELECT u.id, u.transfer_sub FROM siwa.users AS u
                 WHERE u.transfer_team = target AND u.transfer_phase = 'prepare' AND u.transfer_state = 'done'
                 ORDER BY u.id;
END $$;
REVOKE ALL ON FUNCTION siwa.export_transfer(text, boolean, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.export_transfer(text, boolean, text) TO siwa_admin;

-- `siwa transfer import FILE` (a buyer with a siwa of their own): each
-- exported user becomes a row awaiting completion toward `team` (this
-- siwa's team), under the seller's siwa id (the app's data moves keyed by
-- it) and with no sub until it completes. Refused, writing nothing, when an
-- id is taken here or a transfer_sub is known already.
CREATE FUNCTION siwa.import_transfer(team text, ids bigint[], transfer_subs text[], login_hint text, OUT imported bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    clash bigint;
    sequence_name text := pg_get_serial_sequence('siwa.users', 'id');
BEGIN
    IF team IS NULL OR team !~ '^[A-Z0-9]{10}$' THEN
        RAISE EXCEPTION 'a team id is 10 upper-case letters and digits' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cardinality(ids) IS DISTINCT FROM cardinality(transfer_subs) OR cardinality(ids) = 0 THEN
        RAISE EXCEPTION 'the import holds no users' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT FROM unnest(ids, transfer_subs) AS i(id, t) WHERE i.id IS NULL OR i.id <= 0 OR i.t IS NULL
               OR i.t !~ '^[[:graph:]]{1,255}$') THEN
        RAISE EXCEPTION 'each user needs a positive user_id and a transfer_sub of 1 to 255 printable characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (SELECT count(DISTINCT i) FROM unnest(ids) AS i) <> cardinality(ids)
       OR (SELECT count(DISTINCT t) FROM unnest(transfer_subs) AS t) <> cardinality(transfer_subs) THEN
        RAISE EXCEPTION 'the import names a user_id or a transfer_sub twice' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT u.id INTO clash FROM siwa.users AS u WHERE u.id = ANY (ids) ORDER BY u.id LIMIT 1;
    IF clash IS NOT NULL THEN
        RAISE EXCEPTION 'user id % exists in this siwa already: an import keeps the seller''s ids, and would merge two people', clash
            USING ERRCODE = 'unique_violation';
    END IF;
    SELECT u.id INTO clash FROM siwa.users AS u WHERE u.transfer_team = team AND u.transfer_sub = ANY (transfer_subs)
    ORDER BY u.id LIMIT 1;
    IF clash IS NOT NULL THEN
        RAISE EXCEPTION 'a transfer_sub of the import is siwa user %''s already (imported before?)', clash
            USING ERRCODE = 'unique_violation';
    END IF;
    INSERT INTO siwa.users (id, apple_sub, status, transfer_sub, transfer_team, transfer_phase, transfer_state, transfer_updated_at)
    SELECT i.id, NULL, 'active', i.t, team, 'complete', 'pending', now()
    FROM unnest(ids, transfer_subs) AS i(id, t) ORDER BY i.id;
    GET DIAGNOSTICS imported = ROW_COUNT;
    -- New users after these get ids above them.
    PERFORM setval(sequence_name::regclass, greatest((SELECT max(u.id) FROM siwa.users AS u),
                                           coalesce(pg_sequence_last_value(sequence_name::regclass), 1)));
    INSERT INTO siwa.audit_log (actor, action, details)
    VALUES ('admin', 'transfer.imported',
            jsonb_build_object('team', team, 'users', imported, 'db_user', session_user::text, 'login_hint', left(login_hint, 64)));
END $$;
REVOKE ALL ON FUNCTION siwa.import_transfer(text, bigint[], text[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.import_transfer(text, bigint[], text[], text) TO siwa_admin;

-- ---------------------------------------------------------------- sign-in --

-- As sql/022's, with one step first: a token carrying `transfer_sub` for a
-- sub siwa does not know links the user awaiting that transfer
-- (siwa.link_transferred_sign_in) and answers `again`: the caller prepares
-- again, now finding the moved user (its id, so the tokens are sealed for
-- it), and signs them in as any known user.
CREATE OR REPLACE FUNCTION siwa.sign_in(
    sub text, current_id bigint, fresh_id bigint, client_id text, email text, is_private_email boolean,
    given_name text, family_name text, real_user_status smallint, signed_in_ms bigint, code bytea, api_key text,
    key_id text, refresh_for_current bytea, access_for_current bytea, refresh_for_fresh bytea, access_for_fresh bytea,
    access_expires_in integer, validation_hours integer,
    email_verified boolean DEFAULT NULL, org_id text DEFAULT NULL, transfer_sub text DEFAULT NULL,
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
       AND NOT EXISTS (SELECT FROM siwa.users AS u WHERE u.apple_sub = sub)
       AND siwa.link_transferred_sign_in(sign_in.transfer_sub, sub) THEN
        outcome := 'again';
        RETURN;
    END IF;
    SELECT u.id, u.status, u.purged_at IS NOT NULL, u.stale_tokens_until_ms,
           (extract(epoch FROM u.last_sign_in_at) * 1000)::bigint
    INTO found_id, found_status, found_purged, found_stale_until, found_last_sign_in_ms
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
                                     given_name, family_name, real_user_status, last_sign_in_at, email_verified, org_id,
                                     transfer_sub)
        VALUES (fresh_id, sub, 'active', signed_in_ms, email, is_private_email,
                CASE WHEN email IS NULL THEN NULL ELSE signed_in_ms END, given_name, family_name, real_user_status, now(),
                CASE WHEN email IS NULL THEN NULL ELSE email_verified END, org_id, sign_in.transfer_sub)
        ON CONFLICT (apple_sub) DO NOTHING
        RETURNING u.id, u.email, u.is_private_email, u.real_user_status, u.email_verified, u.given_name, u.family_name
        INTO user_id, user_email, user_is_private_email, user_real_user_status, user_email_verified, user_given_name,
             user_family_name;
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
            email_verified = CASE WHEN sign_in.email IS NULL THEN NULL ELSE sign_in.email_verified END,
            org_id = sign_in.org_id, transfer_sub = sign_in.transfer_sub,
            created_at = now(), updated_at = now()
        WHERE u.id = found_id
        RETURNING u.id, u.email, u.is_private_email, u.real_user_status, u.email_verified, u.given_name, u.family_name
        INTO user_id, user_email, user_is_private_email, user_real_user_status, user_email_verified, user_given_name,
             user_family_name;
        INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
        VALUES ('api', 'user.account_restarted', sub,
                jsonb_build_object('user_id', fresh_id, 'previous_user_id', found_id, 'previous_status', found_status));
        is_new_user := true;
    ELSE
        -- Reconnecting after a revocation (Apple's `user` object comes
        -- again then): a name given replaces the stored pair.
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
    -- No email, no name: whether the names were replaced, only.
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('api', 'user.signed_in', sub,
            jsonb_build_object('user_id', target, 'api_key', api_key, 'is_new_user', is_new_user, 'client_id', client_id,
                               'refresh_token_stored', refresh_for_current IS NOT NULL OR refresh_for_fresh IS NOT NULL)
            || CASE WHEN renamed THEN jsonb_build_object('names_replaced', true) ELSE '{}'::jsonb END);
    outcome := 'stored';
END $$;

-- ---------------------------------------------------------- the app event --

-- As sql/015's, plus `user.transferred`.
CREATE OR REPLACE FUNCTION siwa.app_events_of(action text, details jsonb, job_kind text)
RETURNS TABLE (event_position integer, event_type text) LANGUAGE sql IMMUTABLE AS $$
    SELECT e.event_position, e.event_type
    FROM (VALUES
        (1, CASE action
                WHEN 'notification.recorded' THEN 'apple.' || coalesce(details->>'event_type', 'unknown')
                WHEN 'user.signed_in' THEN 'user.signed_in'
                WHEN 'user.deletion_requested' THEN 'user.deletion_requested'
                WHEN 'user.transferred' THEN 'user.transferred'
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
    FOR EACH ROW WHEN (NEW.action IN ('user.signed_in', 'user.deletion_requested', 'user.transferred', 'token.invalid_grant',
                                      'purge.cancelled', 'job.completed', 'job.discarded'))
    EXECUTE FUNCTION siwa.enqueue_app_events();

-- What the app receives: as sql/021's, plus `user.transferred` (`sub` is
-- the new one; `previous_sub` the old, absent for a user imported from
-- another siwa, which the app knows by `user_id`).
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
               WHEN app_type = 'user.transferred' THEN jsonb_build_object(
                   'user_id', a.details->'user_id', 'previous_sub', a.details->'old_sub', 'team', a.details->'team',
                   'via', a.details->'via')
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

-- `siwa webhooks replay`: as sql/017's, with `user.transferred` among the
-- actions it reads back.
CREATE OR REPLACE FUNCTION siwa.replay_app_events(replay_since timestamptz, replay_sub text, replay_limit integer, login_hint text,
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
        WHERE a.action IN ('notification.recorded', 'user.signed_in', 'user.deletion_requested', 'user.transferred',
                           'token.invalid_grant',
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

-- ------------------------------------------------------------- grants --

INSERT INTO siwa.runtime_grants (migration, position, process, why, statement) VALUES
    (23, 1, 'worker', 'a transfer_complete job moves its user to the new sub Apple answered (audited, with its app event)',
        'GRANT EXECUTE ON FUNCTION siwa.complete_user_transfer(bigint, text, text, text, text, boolean) TO %I'),
    (23, 2, 'serve', 'sign-in links a user awaiting a transfer to the sub of a token carrying its transfer_sub',
        'GRANT EXECUTE ON FUNCTION siwa.link_transferred_sign_in(text, text) TO %I'),
    (23, 3, 'serve', 'GET /v1/users/{sub} answers moved_to for a sub moved within 60 days',
        'GRANT SELECT ON siwa.user_moves TO %I');
