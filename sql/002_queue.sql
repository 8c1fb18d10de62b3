-- The job queue's moving parts (the table itself is in 001_schema.sql).

-- The claim reads runnable jobs of one kind in run_at order. With kind
-- leading, the index hands them over in that order and LIMIT stops early,
-- whatever the statistics say; the 001 index (run_at, id) lost to a bitmap
-- scan and a sort of every runnable row right after a bulk enqueue.
DROP INDEX siwa.jobs_runnable_idx;
CREATE INDEX jobs_runnable_idx ON siwa.jobs (kind, run_at, id) WHERE state IN ('available', 'retryable');

-- A queue table churns: every job is inserted, updated a few times and
-- pruned. Vacuum and analyze it after 1% of its rows changed (the default
-- waits for 20%), so dead index entries do not pile up under the claim.
ALTER TABLE siwa.jobs SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.01,
                           autovacuum_vacuum_cost_delay = 0);

-- Wake the workers whenever a runnable job appears, however it was
-- enqueued: by the receiver, by `siwa jobs retry`, or by an operator's plain
-- INSERT INTO siwa.jobs (kind, args). NOTIFY is delivered at commit, and
-- PostgreSQL folds identical notifications of one transaction into one.
CREATE FUNCTION siwa.wake_workers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('siwa_jobs', NEW.kind);
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_wake_workers_on_insert
    AFTER INSERT ON siwa.jobs
    FOR EACH ROW WHEN (NEW.state IN ('available', 'retryable'))
    EXECUTE FUNCTION siwa.wake_workers();

CREATE TRIGGER jobs_wake_workers_on_requeue
    AFTER UPDATE OF state ON siwa.jobs
    FOR EACH ROW WHEN (NEW.state = 'available' AND OLD.state IS DISTINCT FROM 'available')
    EXECUTE FUNCTION siwa.wake_workers();

-- An account event that arrives while the user's purge is running may need
-- steps the purge has already passed (and the downstream should hear of it):
-- the receiver marks the running job (args->'rerun'), and when that job
-- completes this trigger enqueues a fresh purge for the same user, in the
-- same transaction as the completion, so the rerun cannot be lost.
CREATE FUNCTION siwa.enqueue_purge_rerun() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rerun_id bigint;
BEGIN
    INSERT INTO siwa.jobs (kind, args)
    VALUES (NEW.kind, jsonb_build_object('apple_sub', NEW.args->>'apple_sub',
                                         'event_type', NEW.args->'rerun'->>'event_type',
                                         'jti', NEW.args->'rerun'->>'jti', 'rerun_of', NEW.id))
    ON CONFLICT DO NOTHING
    RETURNING id INTO rerun_id;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('worker', 'job.rerun_enqueued', NEW.args->>'apple_sub',
            jsonb_build_object('job_id', rerun_id, 'after_job_id', NEW.id));
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_purge_rerun
    AFTER UPDATE OF state ON siwa.jobs
    FOR EACH ROW WHEN (NEW.state = 'completed' AND OLD.state <> 'completed' AND NEW.args ? 'rerun')
    EXECUTE FUNCTION siwa.enqueue_purge_rerun();

-- Admin views for the auditor role: what happened to each job, without args
-- beyond the Apple sub (which the audit trail holds too).
CREATE VIEW siwa.job_overview AS
    SELECT id, kind, args->>'apple_sub' AS apple_sub, state, attempt, max_attempts, run_at,
           created_at, attempted_at, finalized_at, jsonb_array_length(errors) AS error_count
    FROM siwa.jobs;
GRANT SELECT ON siwa.job_overview TO siwa_auditor;
