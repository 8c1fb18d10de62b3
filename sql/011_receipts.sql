-- Deletion receipts: when a purge completes, the worker signs a receipt (a
-- compact JWS, ES256, with the key of SIWA_RECEIPT_KEY_FILE) and stores it
-- here, in the transaction that completes the job: a completed purge
-- without its receipt cannot be committed (when receipts are on). A table
-- of its own because siwa.jobs is pruned (SIWA_JOB_RETENTION_DAYS) and a
-- receipt is kept for good: it is the evidence handed to App Review or to a
-- person who asked for erasure. It holds the Apple sub and internal ids,
-- never an email address, a name or a token.
CREATE TABLE siwa.deletion_receipts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- No foreign key: the job row is pruned, the receipt stays. A job
    -- completes once (siwa jobs retry refuses a completed job).
    job_id      bigint NOT NULL UNIQUE,
    apple_sub   text NOT NULL,
    jti         text NOT NULL UNIQUE,
    -- The JWS header's kid: the RFC 7638 thumbprint of the signing key.
    key_id      text NOT NULL,
    issued_at   timestamptz NOT NULL DEFAULT now(),
    -- The compact JWS, exactly as signed.
    receipt     text NOT NULL CHECK (receipt ~ '^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$')
);
-- `siwa receipts show SUB` and GET /admin/receipts/{sub}: newest first.
CREATE INDEX deletion_receipts_apple_sub_idx ON siwa.deletion_receipts (apple_sub, issued_at DESC, id DESC);

-- Append-only, as the audit trail: UPDATE, DELETE and TRUNCATE are refused
-- to everyone (the owner too), besides the runtime role's privileges.
CREATE FUNCTION siwa.refuse_receipt_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'siwa.deletion_receipts is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER deletion_receipts_append_only
    BEFORE UPDATE OR DELETE ON siwa.deletion_receipts
    FOR EACH ROW EXECUTE FUNCTION siwa.refuse_receipt_change();
CREATE TRIGGER deletion_receipts_no_truncate
    BEFORE TRUNCATE ON siwa.deletion_receipts
    FOR EACH STATEMENT EXECUTE FUNCTION siwa.refuse_receipt_change();

INSERT INTO siwa.runtime_grants (migration, position, why, statement) VALUES
    (11, 1, 'the worker stores each receipt as its purge completes (RETURNING needs SELECT), and the admin '
            'listener reads them; no UPDATE, no DELETE (the triggers of 011_receipts.sql refuse those to the owner as well)',
        'GRANT SELECT, INSERT ON siwa.deletion_receipts TO %I');

-- Admins (`siwa receipts show`) and auditors read them: a receipt holds
-- nothing an auditor may not see.
GRANT SELECT ON siwa.deletion_receipts TO siwa_admin, siwa_auditor;
