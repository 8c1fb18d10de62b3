-- Two runtime roles: `siwa serve` (internet-facing) and `siwa worker` no
-- longer share one. Each is granted what its own process runs, so serve's
-- credentials cannot write the audit chain or its seal mark, sign deletion
-- receipts or mark a job's steps done, and the worker's cannot make API
-- keys or record notifications. `siwa migrate` grants the rows marked
-- `serve` (and `both`) to SIWA_SERVE_ROLE, those marked `worker` (and
-- `both`) to SIWA_WORKER_ROLE; with one role for both (a trial), that role
-- gets every row, as before.
--
-- A migration that adds runtime grants says whose they are: `serve`,
-- `worker` or `both` (the default, for rows written without the column).
ALTER TABLE siwa.runtime_grants
    ADD COLUMN process text NOT NULL DEFAULT 'both' CHECK (process IN ('serve', 'worker', 'both'));

-- ------------------------------------------------- the existing rows, split --

-- serve only: the receiver, sign-in and its API keys, the admin listener.
UPDATE siwa.runtime_grants SET process = 'serve'
WHERE (migration, position) IN ((4, 4), (6, 2), (6, 3), (6, 4), (6, 5), (8, 2), (12, 1));

-- worker only: the sealer, the app events' bodies.
UPDATE siwa.runtime_grants SET process = 'worker'
WHERE (migration, position) IN ((9, 3), (14, 3));

-- Rows that both processes needed part of: each row keeps the worker's
-- part, and serve's part is a row of its own below (18, n).
UPDATE siwa.runtime_grants SET process = 'worker',
    why = 'the purge erases personal data and keeps the rows as tombstones; token validation signs users out',
    statement = 'GRANT SELECT, UPDATE ON siwa.users, siwa.notifications TO %I'
WHERE (migration, position) = (4, 3);
UPDATE siwa.runtime_grants SET process = 'worker',
    why = 'the queue: claim, record steps, complete, fail, rescue, and prune finished jobs'
WHERE (migration, position) = (4, 5);
UPDATE siwa.runtime_grants SET process = 'worker',
    why = 'validation renews tokens, the purge and `siwa tokens rekey|forget` rewrite or delete them, the cleaner prunes old codes',
    statement = 'GRANT SELECT, UPDATE, DELETE ON siwa.apple_tokens, siwa.sign_in_codes TO %I'
WHERE (migration, position) = (6, 1);
UPDATE siwa.runtime_grants SET process = 'worker'
WHERE (migration, position) IN ((9, 2), (11, 1), (14, 1));

-- sql/015's and sql/017's rows: sign-in cancels a waiting purge (15, 1),
-- the admin page lists the waiting purges (15, 5) and the admin listener
-- changes jobs for an admin key (17, 1): serve. Validation notes its
-- answers, ends sessions and reads the pause (15, 2; 15, 3: the worker,
-- and `siwa tokens validate`, which runs as the worker's role); a
-- receipt's steps are checked against the trail (17, 2): the worker.
-- purge_waiting (15, 4) stays `both`.
UPDATE siwa.runtime_grants SET process = 'serve' WHERE (migration, position) IN ((15, 1), (15, 5), (17, 1));
UPDATE siwa.runtime_grants SET process = 'worker' WHERE (migration, position) IN ((15, 2), (15, 3), (17, 2));

-- Rows both keep whole: (4, 1) the schema, (4, 2) schema_migrations, (4, 6)
-- job_overview, (4, 7) audit_log, (8, 1) enqueue_purge (the inbox, in-app
-- deletion, token validation), (9, 1) the audit log's seq, (10, 1) the
-- views (the admin routes; serve's and the worker's /metrics read
-- report_settings), (14, 2) the app event mapping (the inbox, and the audit
-- trigger on whoever writes the row).

INSERT INTO siwa.runtime_grants (migration, position, process, why, statement) VALUES
    (18, 1, 'serve', 'the inbox statement and sign-in upsert users (a restarted account takes a new id); in-app deletion marks them',
        'GRANT SELECT, INSERT, UPDATE ON siwa.users TO %I'),
    (18, 2, 'serve', 'the inbox statement records each notification once (RETURNING needs SELECT)',
        'GRANT SELECT, INSERT ON siwa.notifications TO %I'),
    -- Column privileges: serve enqueues (kind, args, run_at) and changes
    -- no job: a purge merges into a pending one through siwa.enqueue_purge
    -- (SECURITY DEFINER, sql/015), a waiting purge is cancelled through
    -- siwa.cancel_grace_purge. It never writes steps_done, errors, attempt
    -- or the lease, nor a pending purge's args.
    (18, 3, 'serve', 'the inbox''s and the audit trigger''s deliveries to the app, and the audit of purges, enqueue jobs',
        'GRANT SELECT, INSERT (kind, args, run_at) ON siwa.jobs TO %I'),
    (18, 5, 'serve', 'sign-in stores tokens (a new sign-in replaces the row) and the code of each sign-in for a retry''s answer',
        'GRANT SELECT, INSERT, UPDATE ON siwa.apple_tokens, siwa.sign_in_codes TO %I'),
    (18, 6, 'serve', 'the admin listener verifies the audit chain and shows its head; only the worker seals',
        'GRANT SELECT ON siwa.audit_chain TO %I'),
    (18, 7, 'serve', 'the admin listener shows receipts; only the worker signs and stores them',
        'GRANT SELECT ON siwa.deletion_receipts TO %I'),
    (18, 8, 'serve', 'the inbox statement and the audit trigger read whether the app webhook is on; the worker sets it',
        'GRANT SELECT ON siwa.app_webhook TO %I');

-- ----------------------------------------------------------- the grants --

-- Grants `runtime` the rows for `processes` (serve, worker, or both for a
-- one-role trial) and the `both` rows, after revoking whatever it held on
-- siwa's tables, sequences and functions: a row reclassified (or a role
-- that was once the other process's) leaves nothing behind. The owner, a
-- member of it or a superuser is never stripped: migrate warns about those.
CREATE FUNCTION siwa.grant_runtime_privileges(runtime name, processes text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    grant_row record;
BEGIN
    IF NOT processes <@ ARRAY['serve', 'worker'] OR cardinality(processes) = 0 THEN
        RAISE EXCEPTION 'processes must be serve, worker or both, not %', processes;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_roles AS r WHERE r.rolname = runtime
                   AND (r.rolsuper OR pg_has_role(r.oid, (SELECT relowner FROM pg_class WHERE oid = 'siwa.audit_log'::regclass), 'USAGE'))) THEN
        EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA siwa FROM %I', runtime);
        EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA siwa FROM %I', runtime);
        EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA siwa FROM %I', runtime);
    END IF;
    FOR grant_row IN SELECT statement FROM siwa.runtime_grants
                     WHERE process = 'both' OR process = ANY (processes)
                     ORDER BY migration, position LOOP
        EXECUTE format(grant_row.statement, runtime);
    END LOOP;
END $$;
REVOKE ALL ON FUNCTION siwa.grant_runtime_privileges(name, text[]) FROM PUBLIC;

-- The one-argument form, as before: one role for both processes.
CREATE OR REPLACE FUNCTION siwa.grant_runtime_privileges(runtime name) RETURNS void LANGUAGE sql AS $$
    SELECT siwa.grant_runtime_privileges(runtime, ARRAY['serve', 'worker'])
$$;
REVOKE ALL ON FUNCTION siwa.grant_runtime_privileges(name) FROM PUBLIC;
