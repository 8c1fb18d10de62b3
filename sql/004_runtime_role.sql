-- Least privilege: `siwa migrate` runs as the owner of the schema (DDL);
-- `siwa serve` and `siwa worker` run as a runtime role that owns nothing.
-- The runtime role cannot ALTER, DROP or TRUNCATE siwa's tables nor disable
-- their triggers (only an owner can), and may only INSERT and SELECT on the
-- audit trail.
--
-- `siwa migrate` calls this function after every run, for the user named in
-- SIWA_DATABASE_URL when it is not the owner. A later migration that adds a
-- table replaces the function with the new grants (CREATE OR REPLACE), so
-- the privileges live beside the schema they are for.
CREATE FUNCTION siwa.grant_runtime_privileges(runtime name) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA siwa TO %I', runtime);
    -- serve and worker check at start-up that the schema is up to date.
    EXECUTE format('GRANT SELECT ON siwa.schema_migrations TO %I', runtime);
    -- The inbox statement upserts users; the purge erases email addresses
    -- (users.email, notifications.claims) and keeps the rows as tombstones.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON siwa.users, siwa.notifications TO %I', runtime);
    -- The rejection writer inserts; its retention prunes old rows.
    EXECUTE format('GRANT SELECT, INSERT, DELETE ON siwa.rejected_notifications TO %I', runtime);
    -- The queue: enqueue, claim, complete, and prune finished jobs.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON siwa.jobs TO %I', runtime);
    EXECUTE format('GRANT SELECT ON siwa.job_overview TO %I', runtime);
    -- Append-only: no UPDATE, no DELETE, no TRUNCATE (the triggers of
    -- 001_schema.sql refuse those to the owner as well).
    EXECUTE format('GRANT SELECT, INSERT ON siwa.audit_log TO %I', runtime);
END $$;
REVOKE ALL ON FUNCTION siwa.grant_runtime_privileges(name) FROM PUBLIC;
