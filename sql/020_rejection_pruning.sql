-- Refused deliveries (siwa.rejected_notifications) are pruned past
-- SIWA_REJECTION_RETENTION_DAYS by the one worker that leads maintenance
-- (it holds a session advisory lock; see MaintenanceLeader), no longer by
-- every serve process: the rescuer, the cleaner, the audit sealer, token
-- validation and this pruning all run once, on one elected worker.
--
-- So serve's role (internet-facing) keeps what the rejection writer needs
-- and loses DELETE: its credentials can no longer erase the record of what
-- was refused. The worker's role may read the rows' age and delete them.
UPDATE siwa.runtime_grants
SET why = 'the rejection writer inserts refused deliveries; the worker that leads maintenance prunes them',
    statement = 'GRANT SELECT, INSERT ON siwa.rejected_notifications TO %I'
WHERE (migration, position) = (4, 4);

INSERT INTO siwa.runtime_grants (migration, position, process, why, statement) VALUES
    (20, 1, 'worker', 'the worker that leads maintenance prunes refused deliveries past SIWA_REJECTION_RETENTION_DAYS',
        'GRANT SELECT, DELETE ON siwa.rejected_notifications TO %I');
