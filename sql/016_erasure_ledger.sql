-- Erasures that survive a restored backup. The worker appends every
-- completed purge (sub, job id, completion time, receipt id) to the erasure
-- ledger, files outside the database (SIWA_ERASURE_LEDGER_DIR), before the
-- completion commits. After a restore, `siwa erasures reapply LEDGER...`
-- (an admin's role, member of siwa_admin) verifies each line's signature
-- and calls siwa.reapply_erasure for it: every sub whose data the restored
-- database may still hold gets a purge again.
--
-- Admins write no siwa table directly: this function is the one way in,
-- checks what it is given, decides, enqueues through siwa.enqueue_purge
-- (sql/008) and writes the audit row `erasure.reapplied` in the same
-- statement. It trusts its caller as far as the sub goes: an admin could
-- enqueue the purge of any sub with it, as `siwa jobs` can; the signature
-- check is the command's, and every call is on the trail with its db_user.
--
-- Outcomes (`dry_run` decides the same and writes nothing):
--   already_reapplied  an earlier reapply after this restore already wrote
--                      the audit row for this ledger line (idempotence)
--   already_erased     the restored database shows the erasure done: the
--                      user's row is purged (purged_at set, which the
--                      built-in step does first), or, for a sub siwa has no
--                      row for, the ledger's job completed before the backup
--                      (its job.completed row or its receipt is there)
--   enqueued           a new purge job (reapplied_job_id)
--   pending            merged into the sub's purge that is already pending
-- A sub with no users row at all gets a purge too: siwa purges unknown subs
-- (the plan's steps are keyed by sub and the app's own tables may hold it).
CREATE FUNCTION siwa.reapply_erasure(sub text, ledger_job_id bigint, receipt_id text, dry_run boolean,
    OUT outcome text, OUT reapplied_job_id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    user_found boolean := false;
    user_purged boolean := false;
    queued record;
BEGIN
    IF sub IS NULL OR sub = '' OR length(sub) > 255 OR sub ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'siwa.reapply_erasure: sub must be printable text of 1 to 255 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF ledger_job_id IS NULL OR ledger_job_id <= 0 THEN
        RAISE EXCEPTION 'siwa.reapply_erasure: ledger_job_id must be a job id' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF receipt_id IS NOT NULL AND (length(receipt_id) > 100 OR receipt_id ~ '[[:cntrl:]]') THEN
        RAISE EXCEPTION 'siwa.reapply_erasure: receipt_id must be printable text of at most 100 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The user's row locked first, as every writer of a user's purge does
    -- (siwa.enqueue_purge expects it): a sign-in waits for this decision.
    SELECT true, u.purged_at IS NOT NULL INTO user_found, user_purged
    FROM siwa.users AS u WHERE u.apple_sub = sub FOR UPDATE;
    user_found := coalesce(user_found, false);

    SELECT 'already_reapplied', (a.details->>'job_id')::bigint INTO outcome, reapplied_job_id
    FROM siwa.audit_log AS a
    WHERE a.apple_sub = sub AND a.action = 'erasure.reapplied' AND a.details->>'ledger_job_id' = ledger_job_id::text
    ORDER BY a.seq DESC LIMIT 1;
    IF FOUND THEN
        RETURN;
    END IF;

    IF user_found AND user_purged THEN
        outcome := 'already_erased';
        RETURN;
    END IF;
    -- The backup holds the erasure and, after it, the user's comeback (a
    -- new account on the same row, sql/006's user.account_restarted): that
    -- account is no one's erasure request.
    IF user_found AND EXISTS (
        SELECT FROM siwa.audit_log AS back
        WHERE back.apple_sub = sub AND back.action = 'user.account_restarted'
          AND EXISTS (SELECT FROM siwa.audit_log AS done
                      WHERE done.apple_sub = sub AND done.action = 'job.completed'
                        AND done.details->>'job_id' = ledger_job_id::text AND done.seq < back.seq)) THEN
        outcome := 'already_erased';
        RETURN;
    END IF;
    IF NOT user_found AND (
        EXISTS (SELECT FROM siwa.audit_log AS a
                WHERE a.apple_sub = sub AND a.action = 'job.completed' AND a.details->>'job_id' = ledger_job_id::text)
        OR EXISTS (SELECT FROM siwa.deletion_receipts AS r
                   WHERE r.apple_sub = sub AND (r.job_id = ledger_job_id OR r.jti = receipt_id))) THEN
        outcome := 'already_erased';
        RETURN;
    END IF;

    IF dry_run THEN
        SELECT j.id INTO reapplied_job_id FROM siwa.jobs AS j
        WHERE j.kind = 'purge_user' AND j.args->>'apple_sub' = sub AND j.state IN ('available', 'running', 'retryable');
        outcome := CASE WHEN reapplied_job_id IS NULL THEN 'enqueued' ELSE 'pending' END;
        RETURN;
    END IF;
    SELECT e.job_id, e.inserted INTO queued
    FROM siwa.enqueue_purge(sub, 'erasure-reapplied', NULL, false, false,
                            jsonb_build_object('ledger_job_id', ledger_job_id)) AS e;
    reapplied_job_id := queued.job_id;
    outcome := CASE WHEN queued.inserted THEN 'enqueued' ELSE 'pending' END;
    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
    VALUES ('admin', 'erasure.reapplied', sub,
            jsonb_build_object('job_id', reapplied_job_id, 'ledger_job_id', ledger_job_id, 'receipt_id', receipt_id,
                               'outcome', outcome, 'db_user', session_user::text));
END $$;
REVOKE ALL ON FUNCTION siwa.reapply_erasure(text, bigint, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.reapply_erasure(text, bigint, text, boolean) TO siwa_admin;
