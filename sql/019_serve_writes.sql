-- What serve's credentials may write to the trail and the queue. Serve
-- (internet-facing) inserts audit rows and jobs itself, in its hot
-- statements (the inbox statement, siwa.sign_in, in-app deletion): with
-- plain INSERT privileges its credentials could also write a row the
-- worker writes (`job.completed`, `token.invalid_grant`, ...) or a
-- delivery of any type, and so send the app a forged `purge.completed` or
-- `consent.revoked`. From here:
--
-- * serve's role may insert only the audit actions serve writes, and only
--   `app_event` jobs (a purge goes through siwa.enqueue_purge, SECURITY
--   DEFINER): row-level security, a restrictive policy per serve role,
--   made by siwa.grant_runtime_privileges. A one-role trial (serve and
--   worker share a role) keeps the plain privileges.
-- * the worker delivers an event only when its audit row maps to it
--   (siwa.app_event_body): a delivery job that names another type, another
--   user or another id than the row's is refused, never sent.
--
-- What the database cannot check stays serve's to say: that Apple signed a
-- notification, that an identity token is genuine, that an admin key's
-- secret was right. Those rows carry serve's role in `db_user`.

-- ---------------------------------------------------- row-level security --

-- Every role keeps what its table privileges allow (this policy lets every
-- row through); the restrictive policies below narrow serve's inserts. The
-- owner (migrations, SECURITY DEFINER functions) is not subject to them.
ALTER TABLE siwa.audit_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY granted ON siwa.audit_log USING (true) WITH CHECK (true);
ALTER TABLE siwa.jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY granted ON siwa.jobs USING (true) WITH CHECK (true);

-- The audit actions serve writes as itself: the inbox statement's, in-app
-- deletion's and siwa.sign_in's. Everything else it causes (a purge
-- enqueued or merged, a waiting purge cancelled, an admin's job change) is
-- written by a SECURITY DEFINER function, which checks what it writes.
CREATE FUNCTION siwa.serve_audit_actions() RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['notification.recorded', 'user.signed_in', 'user.account_restarted', 'user.deletion_requested']
$$;

-- Makes `runtime`'s inserts into the trail and the queue those of serve
-- (limited) or lifts that limit (a worker's role, or one role for both).
-- The policies name the role: DROP ROLE then refuses until they go, which
-- siwa migrate does when the role no longer serves.
CREATE FUNCTION siwa.limit_serve_writes(runtime name, limited boolean) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    policy name := left('serve_writes_' || runtime, 63);
BEGIN
    EXECUTE format('DROP POLICY IF EXISTS %I ON siwa.audit_log', policy);
    EXECUTE format('DROP POLICY IF EXISTS %I ON siwa.jobs', policy);
    IF limited THEN
        EXECUTE format('CREATE POLICY %I ON siwa.audit_log AS RESTRICTIVE FOR INSERT TO %I '
                       'WITH CHECK (action = ANY (siwa.serve_audit_actions()))', policy, runtime);
        EXECUTE format('CREATE POLICY %I ON siwa.jobs AS RESTRICTIVE FOR INSERT TO %I '
                       'WITH CHECK (kind = ''app_event'')', policy, runtime);
    END IF;
END $$;
REVOKE ALL ON FUNCTION siwa.limit_serve_writes(name, boolean) FROM PUBLIC;

-- As sql/018's, and then the limit: a role granted serve's rows alone is
-- limited; one granted the worker's (alone or with serve's) is not.
CREATE OR REPLACE FUNCTION siwa.grant_runtime_privileges(runtime name, processes text[]) RETURNS void LANGUAGE plpgsql AS $$
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
    PERFORM siwa.limit_serve_writes(runtime, processes = ARRAY['serve']);
END $$;
REVOKE ALL ON FUNCTION siwa.grant_runtime_privileges(name, text[]) FROM PUBLIC;

-- --------------------------------------------------- what the worker sends --

-- The delivery a job's args name, checked against its audit row: the row
-- exists, is the args' user's, and maps (siwa.app_events_of) to the args'
-- type at the position the args' event id gives. No row when any of that
-- fails: the worker refuses the delivery (a permanent failure, the job
-- discarded and audited) and the app hears nothing. The body is sql/014's.
CREATE FUNCTION siwa.app_event_body(args jsonb, include_email boolean,
                                    OUT event_id text, OUT occurred_at text, OUT data jsonb)
LANGUAGE sql STABLE AS $$
    SELECT 'evt_' || a.seq || '_' || e.event_position, body.occurred_at, body.data
    FROM siwa.audit_log AS a,
         siwa.app_events_of(a.action, a.details,
                            CASE WHEN a.action IN ('job.completed', 'job.discarded')
                                 THEN siwa.app_event_job_kind((a.details->>'job_id')::bigint, a.apple_sub, a.seq) END) AS e,
         siwa.app_event_payload(a.seq, e.event_type, include_email) AS body
    WHERE a.seq = (args->>'audit_seq')::bigint
      AND a.apple_sub IS NOT DISTINCT FROM args->>'apple_sub'
      AND e.event_type = args->>'event_type'
      AND 'evt_' || a.seq || '_' || e.event_position = args->>'event_id'
$$;
REVOKE ALL ON FUNCTION siwa.app_event_body(jsonb, boolean) FROM PUBLIC;

INSERT INTO siwa.runtime_grants (migration, position, process, why, statement) VALUES
    (19, 1, 'worker', 'the worker builds each delivery''s body from its audit row, and sends only what the row says',
        'GRANT EXECUTE ON FUNCTION siwa.app_event_body(jsonb, boolean) TO %I'),
    (19, 2, 'both', 'serve''s inserts into the trail are checked against the actions it writes (row-level security)',
        'GRANT EXECUTE ON FUNCTION siwa.serve_audit_actions() TO %I');
