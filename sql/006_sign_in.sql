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
