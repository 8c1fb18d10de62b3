-- The identity token's claims siwa keeps, and the names given back (issue
-- 21, §4).
--
-- * `email_verified` is kept with the address it is about (Apple's
--   documents say it is always true; what the token says is kept all the
--   same, so an unverified address is marked so).
-- * `org_id` (an Apple Business account's organization) and the
--   `transfer_sub` of the latest token that carried one (an app transfer
--   between teams, TN3159) are kept for later; the purge erases them
--   with the rest (a tombstone keeps the sub and its final status).
-- * Names: Apple sends the user's name again on the first authorization
--   after the user revoked the app. A sign-in that reconnects (the user's
--   consent was revoked, or their last sign-in is older than their last
--   revocation or ended session) and brings a name replaces the stored
--   pair; any other sign-in only fills names the user lacks, as before.
-- * sign_in answers the stored `email_verified` and names, for the sign-in
--   answer.

ALTER TABLE siwa.users
    ADD COLUMN email_verified boolean,
    ADD COLUMN org_id         text,
    -- The latest identity token's `transfer_sub` (named apart from what a
    -- transfer's own steps may store).
    ADD COLUMN token_transfer_sub text;

-- The new arguments come last, with defaults: a caller of the old 19
-- still reaches it. The answer gains columns, so the old function goes.
DROP FUNCTION siwa.sign_in(text, bigint, bigint, text, text, boolean, text, text, smallint, bigint, bytea, text,
                           text, bytea, bytea, bytea, bytea, integer, integer);

-- As sql/015's, with the claims above kept and the names replaced on a
-- reconnection.
CREATE FUNCTION siwa.sign_in(
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
                                     token_transfer_sub)
        VALUES (fresh_id, sub, 'active', signed_in_ms, email, is_private_email,
                CASE WHEN email IS NULL THEN NULL ELSE signed_in_ms END, given_name, family_name, real_user_status, now(),
                CASE WHEN email IS NULL THEN NULL ELSE email_verified END, org_id, transfer_sub)
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
            org_id = sign_in.org_id, token_transfer_sub = sign_in.transfer_sub,
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
            token_transfer_sub = coalesce(sign_in.transfer_sub, u.token_transfer_sub),
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
REVOKE ALL ON FUNCTION siwa.sign_in(text, bigint, bigint, text, text, boolean, text, text, smallint, bigint, bytea, text,
                                    text, bytea, bytea, bytea, bytea, integer, integer, boolean, text, text) FROM PUBLIC;

-- serve's grant of the old function names a signature that is gone: the
-- new one takes its place (serve only, as sql/018 made the old row).
DELETE FROM siwa.runtime_grants WHERE (migration, position) = (6, 3);
INSERT INTO siwa.runtime_grants (migration, position, process, why, statement) VALUES
    (22, 1, 'serve', 'sign-in''s second call (with the claims sql/022 keeps)',
        'GRANT EXECUTE ON FUNCTION siwa.sign_in(text, bigint, bigint, text, text, boolean, text, text, smallint, '
        'bigint, bytea, text, text, bytea, bytea, bytea, bytea, integer, integer, boolean, text, text) TO %I');
