-- A tamper-evident audit trail: a SHA-256 hash chain over siwa.audit_log in
-- seq order, kept in a side table, siwa.audit_chain, which a sealer (each
-- `siwa worker`, every second, one at a time) appends to once the rows'
-- writing transactions have all ended. The sealer and `siwa audit verify`
-- compute the hashes in siwa itself (AuditChain.swift: the canonical
-- encoding, version 1), never with a function a superuser could redefine.
--
-- Why not a hash computed as each row is inserted: every audit-writing
-- transaction would take the chain's head row and hold it until it commits,
-- so the ingest writers, the workers and admins' commands would commit one
-- at a time (and could deadlock on the locks they take after their audit
-- row). Sealing afterwards costs the writers nothing; the price is that
-- the newest rows (a second or two's worth) are not yet sealed.
--
-- Why not the hashes in siwa.audit_log itself: filling them in later is an
-- UPDATE, and no role siwa runs as may UPDATE the log.

-- Finite times only: the encoding holds occurred_at as microseconds since
-- 1970, which 'infinity' has not.
ALTER TABLE siwa.audit_log ADD CONSTRAINT audit_log_occurred_at_finite CHECK (isfinite(occurred_at));

-- The seq of a row is handed out only after its transaction has an id. So
-- once no transaction older than an id X runs any more, every seq handed
-- out before X was taken belongs to a transaction that has ended: its row
-- is committed (visible) or rolled back (a gap forever). That is how the
-- sealer knows it may seal up to a seq without a late commit below it
-- (siwa.audit_seal_mark). An identity column takes its value before the
-- transaction id, hence a sequence of its own and a default. The sequence
-- must keep CACHE 1 (the default): a session's cached values would be
-- handed out after the mark that counted them.
ALTER TABLE siwa.audit_log ALTER COLUMN seq DROP IDENTITY;
CREATE SEQUENCE siwa.audit_log_seq AS bigint OWNED BY siwa.audit_log.seq;
SELECT setval('siwa.audit_log_seq', max(seq)) FROM siwa.audit_log HAVING max(seq) IS NOT NULL;

CREATE FUNCTION siwa.next_audit_seq() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_current_xact_id();  -- the transaction's id first (see above)
    RETURN nextval('siwa.audit_log_seq');
END $$;
ALTER TABLE siwa.audit_log ALTER COLUMN seq SET DEFAULT siwa.next_audit_seq();

-- One row per sealed audit row, in seq order: row_hash is SHA-256 over the
-- row's canonical encoding, which begins with prev_hash, the row_hash of
-- the sealed row before it (32 zero bytes for the first).
CREATE TABLE siwa.audit_chain (
    seq       bigint PRIMARY KEY,
    prev_hash bytea NOT NULL CHECK (octet_length(prev_hash) = 32),
    row_hash  bytea NOT NULL CHECK (octet_length(row_hash) = 32),
    sealed_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION siwa.refuse_chain_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'siwa.audit_chain is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_chain_append_only
    BEFORE UPDATE OR DELETE ON siwa.audit_chain
    FOR EACH ROW EXECUTE FUNCTION siwa.refuse_chain_change();
CREATE TRIGGER audit_chain_no_truncate
    BEFORE TRUNCATE ON siwa.audit_chain
    FOR EACH STATEMENT EXECUTE FUNCTION siwa.refuse_chain_change();

-- The sealer's mark: every seq up to `seq` was handed out before the
-- transaction `xid` took its id; once no transaction older than `xid` runs,
-- those rows are final and may be sealed. One row, written by the sealer
-- (AuditSealer.swift) under its advisory lock.
CREATE TABLE siwa.audit_seal_mark (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    seq      bigint NOT NULL,
    xid      xid8 NOT NULL
);

-- Whoever appends to the log takes a seq.
GRANT USAGE ON SEQUENCE siwa.audit_log_seq TO siwa_admin;
-- `siwa audit verify` and `head` for admins and auditors.
GRANT SELECT ON siwa.audit_chain TO siwa_admin, siwa_auditor;

INSERT INTO siwa.runtime_grants (migration, position, why, statement) VALUES
    (9, 1, 'appending to the audit log takes a seq',
        'GRANT USAGE ON SEQUENCE siwa.audit_log_seq TO %I'),
    (9, 2, 'the worker seals the audit log: append-only, like the log (no UPDATE, no DELETE, no TRUNCATE)',
        'GRANT SELECT, INSERT ON siwa.audit_chain TO %I'),
    (9, 3, 'the sealer''s mark (what it may seal next)',
        'GRANT SELECT, INSERT, UPDATE ON siwa.audit_seal_mark TO %I');

