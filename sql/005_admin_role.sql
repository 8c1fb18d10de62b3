-- `siwa jobs` for admins, each with a database role of their own that is a
-- member of siwa_admin: the audit trail names them by session_user (what
-- they cannot set with an environment variable), and they can read and
-- requeue jobs, append the audit rows that say so, and nothing else.
-- Like siwa_auditor, the role is created here only if missing (which needs
-- CREATEROLE); deploy/README.md has the superuser create it beforehand.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'siwa_admin') THEN
        CREATE ROLE siwa_admin NOLOGIN;
    END IF;
END $$;
GRANT USAGE ON SCHEMA siwa TO siwa_admin;
-- list/show, enqueue by hand, retry/cancel.
GRANT SELECT, INSERT, UPDATE ON siwa.jobs TO siwa_admin;
-- The job.retry / job.cancel rows (RETURNING seq needs SELECT).
GRANT SELECT, INSERT ON siwa.audit_log TO siwa_admin;
GRANT SELECT ON siwa.job_overview TO siwa_admin;
