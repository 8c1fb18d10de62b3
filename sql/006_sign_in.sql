-- Sign-in and Apple's tokens (the token lifecycle): what `POST /v1/sign-in`
-- stores, the API keys the app's backend calls with, and the refresh
-- tokens the worker validates and the purge revokes.

-- What sign-in adds to a user. Names come only from the `user` object Apple
-- hands the app at the first authorization; they are personal data, erased
-- by the purge with the email address.
ALTER TABLE siwa.users
    ADD COLUMN given_name       text,
    ADD COLUMN family_name      text,
    -- Apple's real_user_status (0 unsupported, 1 unknown, 2 likely real),
    -- sent once, at the first sign-in.
    ADD COLUMN real_user_status smallint,
    -- Shown to the app. (A sign-in also sets status_event_time to the
    -- identity token's iat, Apple's clock: a consent revocation older than
    -- it changes nothing, the user came back after it.)
    ADD COLUMN last_sign_in_at  timestamptz,
    -- Set by the purge's erase: the personal data is gone. A later sign-in
    -- starts a new account (a new id) on the same row.
    ADD COLUMN purged_at        timestamptz;

-- A user's Apple tokens, one row per client id (an app and its web services
-- id get tokens of their own). Encrypted with AES-256-GCM under a key of
-- the key ring (SIWA_TOKEN_ENCRYPTION_KEYS_FILE): `key_id` names it, each
-- ciphertext is nonce ‖ ciphertext ‖ tag, and the user id and client id are
-- its associated data, so a ciphertext copied to another row does not
-- decrypt. No plaintext token is ever written anywhere.
CREATE TABLE siwa.apple_tokens (
    user_id               bigint NOT NULL REFERENCES siwa.users (id) ON UPDATE CASCADE ON DELETE CASCADE,
    client_id             text NOT NULL,
    key_id                text NOT NULL,
    refresh_token         bytea NOT NULL,
    access_token          bytea,
    access_expires_at     timestamptz,
    stored_at             timestamptz NOT NULL DEFAULT now(),
    last_validated_at     timestamptz,
    -- When the worker validates it next. Claiming moves it a whole period
    -- ahead before Apple is called, so two workers, or one restarted
    -- between, call Apple at most once per token per period.
    validate_after        timestamptz NOT NULL,
    -- Consecutive validations that Apple could not decide (5xx, 429,
    -- network): the next try backs off with it. Reset by an answer.
    validation_failures   integer NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, client_id)
);
CREATE INDEX apple_tokens_due_idx ON siwa.apple_tokens (validate_after);
-- Validation claims small batches from a table that churns: keep it vacuumed.
ALTER TABLE siwa.apple_tokens SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- A retried sign-in (the same authorization code for the same verified
-- user, within ten minutes) gets the first answer again: Apple would answer
-- `invalid_grant` for the used code, and a lost response must not lock the
-- user out. Only a hash of the code and what the answer cannot recompute
-- from the user's row; no personal data.
CREATE TABLE siwa.sign_in_codes (
    code_sha256           bytea PRIMARY KEY,
    user_id               bigint NOT NULL,
    apple_sub             text NOT NULL,
    is_new_user           boolean NOT NULL,
    refresh_token_stored  boolean NOT NULL,
    created_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sign_in_codes_created_at_idx ON siwa.sign_in_codes (created_at);
-- The purge's erase removes a user's codes.
CREATE INDEX sign_in_codes_apple_sub_idx ON siwa.sign_in_codes (apple_sub);

-- `GET /v1/users/{sub}` shows the user's latest purge; a user's jobs by sub.
CREATE INDEX jobs_apple_sub_idx ON siwa.jobs ((args->>'apple_sub'), id);

-- The keys the app's backend calls `/v1` with. The key is shown once, when
-- created; only its SHA-256 is kept. `prefix` is the key's public part, to
-- find the row; the secret part is compared by hash in constant time.
CREATE TABLE siwa.api_keys (
    id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                  text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
    prefix                text NOT NULL UNIQUE,
    secret_sha256         bytea NOT NULL,
    created_at            timestamptz NOT NULL DEFAULT now(),
    created_by            text NOT NULL,
    revoked_at            timestamptz,
    revoked_by            text,
    last_used_at          timestamptz
);
-- One live key per name (a revoked name can be reused).
CREATE UNIQUE INDEX api_keys_live_name_idx ON siwa.api_keys (name) WHERE revoked_at IS NULL;

-- Sign-in in two calls (each one round trip), the second one transaction:
--
-- siwa.sign_in_prepare: the user's current id, a fresh id (the account a
-- new user, or one coming back after a purge, gets), and an earlier answer
-- for the same authorization code. siwa seals Apple's tokens for both ids
-- (the user id is in each ciphertext's associated data) before it calls
-- siwa.sign_in, which picks the one that applies.
--
-- siwa.sign_in locks the user's row, then decides in statements of their
-- own (plpgsql takes a fresh snapshot per statement: a sign-in that waited
-- for a concurrent deletion sees the purge it enqueued), then upserts the
-- user, stores the tokens and the code's hash, and audits it. It answers
-- 'stored', 'deletion_in_progress', or 'again' (the row changed since the
-- prepare: prepare and seal again).
ALTER TABLE siwa.users ALTER COLUMN id SET GENERATED BY DEFAULT;

CREATE FUNCTION siwa.sign_in_prepare(sub text, code bytea, replay_window_seconds integer,
    OUT current_id bigint, OUT fresh_id bigint, OUT replay_user_id bigint, OUT replay_sub text,
    OUT replay_is_new boolean, OUT replay_stored boolean)
LANGUAGE sql AS $$
    SELECT (SELECT id FROM siwa.users WHERE apple_sub = sub),
           nextval(pg_get_serial_sequence('siwa.users', 'id')),
           c.user_id, c.apple_sub, c.is_new_user, c.refresh_token_stored
    FROM (SELECT 1) AS one
    LEFT JOIN siwa.sign_in_codes AS c
      ON c.code_sha256 = code AND c.created_at > now() - make_interval(secs => replay_window_seconds)
$$;

CREATE FUNCTION siwa.sign_in(
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
    pending boolean;
    target bigint;
BEGIN
    SELECT u.id, u.status, u.purged_at IS NOT NULL INTO found_id, found_status, found_purged
    FROM siwa.users AS u WHERE u.apple_sub = sub FOR UPDATE;
    IF found_id IS NOT NULL THEN
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
        IF NOT found_purged AND found_id IS DISTINCT FROM current_id THEN
            outcome := 'again';
            RETURN;
        END IF;
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
        -- Coming back after a purge: a new account on the same row.
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
REVOKE ALL ON FUNCTION siwa.sign_in_prepare(text, bytea, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION siwa.sign_in(text, bigint, bigint, text, text, boolean, text, text, smallint, bigint, bytea, text,
                                    text, bytea, bytea, bytea, bytea, integer, integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION siwa.grant_runtime_privileges(runtime name) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA siwa TO %I', runtime);
    -- serve and worker check at start-up that the schema is up to date.
    EXECUTE format('GRANT SELECT ON siwa.schema_migrations TO %I', runtime);
    -- The inbox statement and sign-in upsert users (a restarted account
    -- takes a new id); the purge erases personal data and keeps the rows as
    -- tombstones.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON siwa.users, siwa.notifications TO %I', runtime);
    -- The rejection writer inserts; its retention prunes old rows.
    EXECUTE format('GRANT SELECT, INSERT, DELETE ON siwa.rejected_notifications TO %I', runtime);
    -- The queue: enqueue, claim, complete, and prune finished jobs.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON siwa.jobs TO %I', runtime);
    EXECUTE format('GRANT SELECT ON siwa.job_overview TO %I', runtime);
    -- Append-only: no UPDATE, no DELETE, no TRUNCATE (the triggers of
    -- 001_schema.sql refuse those to the owner as well).
    EXECUTE format('GRANT SELECT, INSERT ON siwa.audit_log TO %I', runtime);
    -- Sign-in stores tokens, validation renews them, the purge and
    -- `siwa tokens rekey` rewrite or delete them.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON siwa.apple_tokens, siwa.sign_in_codes TO %I', runtime);
    -- Sign-in's two calls, and the fresh ids they hand out.
    EXECUTE format('GRANT EXECUTE ON FUNCTION siwa.sign_in_prepare(text, bytea, integer) TO %I', runtime);
    EXECUTE format('GRANT EXECUTE ON FUNCTION siwa.sign_in(text, bigint, bigint, text, text, boolean, text, text, smallint, '
                   'bigint, bytea, text, text, bytea, bytea, bytea, bytea, integer, integer) TO %I', runtime);
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO %I', pg_get_serial_sequence('siwa.users', 'id'), runtime);
    -- serve checks keys and notes their last use; it cannot make or revoke one.
    EXECUTE format('GRANT SELECT (id, name, prefix, secret_sha256, revoked_at, last_used_at), UPDATE (last_used_at) ON siwa.api_keys TO %I', runtime);
END $$;
REVOKE ALL ON FUNCTION siwa.grant_runtime_privileges(name) FROM PUBLIC;

-- Admins (`siwa api-keys`) make and revoke keys, named in the audit trail by
-- their own database role.
-- Never the hash: an admin needs none of it (INSERT takes it, RETURNING leaves it out).
GRANT SELECT (id, name, prefix, created_at, created_by, revoked_at, revoked_by, last_used_at), INSERT,
      UPDATE (revoked_at, revoked_by) ON siwa.api_keys TO siwa_admin;
-- Auditors see which keys exist and when they were used, never a hash.
GRANT SELECT (id, name, prefix, created_at, created_by, revoked_at, revoked_by, last_used_at) ON siwa.api_keys TO siwa_auditor;
