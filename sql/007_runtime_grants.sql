-- The runtime role's privileges as rows, one per GRANT, instead of one
-- function that every migration had to restate whole (CREATE OR REPLACE):
-- two migrations written side by side each replaced the other's grants.
-- From here on a migration that adds a table appends its grants here, and
-- `siwa migrate` (siwa.grant_runtime_privileges) runs them all in order.
--
-- `statement` is a format() string whose one %I is the runtime role.
CREATE TABLE siwa.runtime_grants (
    migration integer NOT NULL,
    position  integer NOT NULL,
    why       text    NOT NULL,
    statement text    NOT NULL CHECK (statement LIKE 'GRANT %' AND statement LIKE '% TO %I'),
    PRIMARY KEY (migration, position)
);

INSERT INTO siwa.runtime_grants (migration, position, why, statement) VALUES
    (4, 1, 'the schema itself',
        'GRANT USAGE ON SCHEMA siwa TO %I'),
    (4, 2, 'serve and worker check at start-up that the schema is up to date',
        'GRANT SELECT ON siwa.schema_migrations TO %I'),
    (4, 3, 'the inbox statement and sign-in upsert users (a restarted account takes a new id); '
           'the purge erases personal data and keeps the rows as tombstones',
        'GRANT SELECT, INSERT, UPDATE ON siwa.users, siwa.notifications TO %I'),
    (4, 4, 'the rejection writer inserts; its retention prunes old rows',
        'GRANT SELECT, INSERT, DELETE ON siwa.rejected_notifications TO %I'),
    (4, 5, 'the queue: enqueue, claim, complete, and prune finished jobs',
        'GRANT SELECT, INSERT, UPDATE, DELETE ON siwa.jobs TO %I'),
    (4, 6, 'the queue''s summary for /metrics and siwa jobs',
        'GRANT SELECT ON siwa.job_overview TO %I'),
    (4, 7, 'append-only: no UPDATE, no DELETE, no TRUNCATE (the triggers of 001_schema.sql refuse those to the owner as well)',
        'GRANT SELECT, INSERT ON siwa.audit_log TO %I'),
    (6, 1, 'sign-in stores tokens, validation renews them, the purge and `siwa tokens rekey` rewrite or delete them',
        'GRANT SELECT, INSERT, UPDATE, DELETE ON siwa.apple_tokens, siwa.sign_in_codes TO %I'),
    (6, 2, 'sign-in''s first call',
        'GRANT EXECUTE ON FUNCTION siwa.sign_in_prepare(text, bytea, integer) TO %I'),
    (6, 3, 'sign-in''s second call',
        'GRANT EXECUTE ON FUNCTION siwa.sign_in(text, bigint, bigint, text, text, boolean, text, text, smallint, '
        'bigint, bytea, text, text, bytea, bytea, bytea, bytea, integer, integer) TO %I'),
    (6, 5, 'serve checks keys and notes their last use; it cannot make or revoke one',
        'GRANT SELECT (id, name, prefix, secret_sha256, revoked_at, last_used_at), UPDATE (last_used_at) ON siwa.api_keys TO %I');

-- The sequence's name is PostgreSQL's to choose; ask it once, here.
INSERT INTO siwa.runtime_grants (migration, position, why, statement)
SELECT 6, 4, 'the fresh user ids sign-in hands out',
       format('GRANT USAGE ON SEQUENCE %s TO %%I', pg_get_serial_sequence('siwa.users', 'id'));

CREATE OR REPLACE FUNCTION siwa.grant_runtime_privileges(runtime name) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    grant_row record;
BEGIN
    FOR grant_row IN SELECT statement FROM siwa.runtime_grants ORDER BY migration, position LOOP
        EXECUTE format(grant_row.statement, runtime);
    END LOOP;
END $$;
REVOKE ALL ON FUNCTION siwa.grant_runtime_privileges(name) FROM PUBLIC;
