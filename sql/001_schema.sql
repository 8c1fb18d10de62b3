-- siwa's own schema. Applied once by `siwa migrate`, recorded in
-- siwa.schema_migrations with its checksum; never edit an applied file,
-- add a new one.

-- The schema itself and siwa.schema_migrations are created by `siwa migrate`.

-- One row per Apple user (`sub`) siwa has heard of, from sign-in or from a
-- notification. A purge leaves a tombstone: the sub and its final status.
CREATE TABLE siwa.users (
    id                        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    apple_sub                 text NOT NULL UNIQUE,
    status                    text NOT NULL DEFAULT 'active'
                              CHECK (status IN ('active', 'consent_revoked', 'deleted')),
    -- event_time (ms) of the notification that set `status`, so a late event
    -- cannot undo a newer one.
    status_event_time         bigint,
    email                     text,
    is_private_email          boolean,
    email_forwarding_enabled  boolean NOT NULL DEFAULT true,
    -- event_time (ms) of the newest email-enabled/disabled event applied.
    email_event_time          bigint,
    created_at                timestamptz NOT NULL DEFAULT now(),
    updated_at                timestamptz NOT NULL DEFAULT now()
);

-- The inbox: every verified notification, exactly once (jti is Apple's
-- idempotency key).
CREATE TABLE siwa.notifications (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    jti           text NOT NULL UNIQUE,
    event_type    text NOT NULL,
    apple_sub     text NOT NULL,
    event_time    bigint NOT NULL,
    audience      text NOT NULL,
    issued_at     timestamptz NOT NULL,
    -- Verified claims with `events` decoded. May hold an email address until
    -- the user's purge redacts it.
    claims        jsonb NOT NULL,
    received_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notifications_apple_sub_idx ON siwa.notifications (apple_sub);

-- What was refused and why. No token, no personal data: only the reason and
-- a hash of the body, so a repeated bad sender can be recognised.
CREATE TABLE siwa.rejected_notifications (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    received_at   timestamptz NOT NULL DEFAULT now(),
    reason        text NOT NULL,
    detail        text,
    body_sha256   text NOT NULL,
    body_bytes    integer NOT NULL
);
CREATE INDEX rejected_notifications_received_at_idx ON siwa.rejected_notifications (received_at);

-- A generic job queue (River/Oban style). Only `kind` and `args` are needed
-- to enqueue by hand: INSERT INTO siwa.jobs (kind, args) VALUES (...).
CREATE TABLE siwa.jobs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind          text NOT NULL,
    args          jsonb NOT NULL DEFAULT '{}',
    state         text NOT NULL DEFAULT 'available'
                  CHECK (state IN ('available', 'running', 'retryable', 'completed', 'discarded', 'cancelled')),
    attempt       integer NOT NULL DEFAULT 0,
    max_attempts  integer NOT NULL DEFAULT 25 CHECK (max_attempts > 0),
    run_at        timestamptz NOT NULL DEFAULT now(),
    locked_by     text,
    locked_until  timestamptz,
    -- One entry per failed attempt: {"attempt", "at", "error"}.
    errors        jsonb NOT NULL DEFAULT '[]',
    -- Completed plan steps, so a retry skips them: {"step name": "at"}.
    steps_done    jsonb NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    attempted_at  timestamptz,
    finalized_at  timestamptz
);
-- The claim query's index: runnable jobs in run_at order.
CREATE INDEX jobs_runnable_idx ON siwa.jobs (run_at, id) WHERE state IN ('available', 'retryable');
CREATE INDEX jobs_lease_idx ON siwa.jobs (locked_until) WHERE state = 'running';
CREATE INDEX jobs_finalized_idx ON siwa.jobs (finalized_at) WHERE finalized_at IS NOT NULL;
-- One pending purge per Apple user: two deletion events, one job. This holds
-- for jobs enqueued by hand too.
CREATE UNIQUE INDEX jobs_one_pending_purge_idx ON siwa.jobs (kind, (args->>'apple_sub'))
    WHERE kind = 'purge_user' AND state IN ('available', 'running', 'retryable');

-- The audit trail: append-only (the trigger below refuses UPDATE and DELETE
-- for everyone, owner included). Internal ids and Apple subs only; never an
-- email address or a name.
CREATE TABLE siwa.audit_log (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    occurred_at   timestamptz NOT NULL DEFAULT now(),
    actor         text NOT NULL,
    action        text NOT NULL,
    apple_sub     text,
    details       jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_apple_sub_idx ON siwa.audit_log (apple_sub, seq);

CREATE FUNCTION siwa.refuse_audit_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'siwa.audit_log is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_log_append_only
    BEFORE UPDATE OR DELETE ON siwa.audit_log
    FOR EACH ROW EXECUTE FUNCTION siwa.refuse_audit_change();
CREATE TRIGGER audit_log_no_truncate
    BEFORE TRUNCATE ON siwa.audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION siwa.refuse_audit_change();

-- Read-only role for admins and auditors: the audit tables, nothing that
-- holds tokens or email addresses.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'siwa_auditor') THEN
        CREATE ROLE siwa_auditor NOLOGIN;
    END IF;
END $$;
GRANT USAGE ON SCHEMA siwa TO siwa_auditor;
GRANT SELECT ON siwa.audit_log, siwa.rejected_notifications TO siwa_auditor;
GRANT SELECT (id, kind, state, attempt, max_attempts, run_at, created_at, attempted_at, finalized_at)
    ON siwa.jobs TO siwa_auditor;
