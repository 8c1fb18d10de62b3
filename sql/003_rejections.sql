-- Refused deliveries are recorded in batches by a writer of their own, and
-- past SIWA_REJECTIONS_PER_MINUTE they are only counted: one summary row per
-- minute stands for all that were not stored one by one.

-- A Content-Length can announce more than 2^31 bytes.
ALTER TABLE siwa.rejected_notifications ALTER COLUMN body_bytes TYPE bigint;

-- A summary row has no single body.
ALTER TABLE siwa.rejected_notifications ALTER COLUMN body_sha256 DROP NOT NULL;

-- How many refused deliveries the row stands for: 1 for a row of its own,
-- the number counted for a summary row (reason 'over_rate_limit').
ALTER TABLE siwa.rejected_notifications ADD COLUMN occurrences bigint NOT NULL DEFAULT 1 CHECK (occurrences > 0);
