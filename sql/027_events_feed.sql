-- The app events feed (issue 34 §6): GET /v1/events?after=ID&limit=N on
-- the API listener answers the app events in order, each with the id and
-- the body its webhook delivery has, so a backend that was down past the
-- deliveries' attempts catches up by itself.
--
-- The events are the audit trail's rows (sql/014), which nothing prunes;
-- the feed answers those recorded within SIWA_EVENTS_FEED_RETENTION_DAYS
-- (serve passes it): a window, not a deletion. An app key then reads a
-- bounded past, and the history of users purged long ago stays with the
-- admins and auditors, who read the trail itself.

-- -------------------------------------------------------------- the switch --

-- The feed's bodies are the webhook's, email addresses included only when
-- the workers deliver them (SIWA_APP_WEBHOOK_INCLUDE_EMAIL, a worker's
-- setting): each worker writes it here at start beside `enabled`, so serve
-- answers what the worker sends without a setting of its own to disagree.
ALTER TABLE siwa.app_webhook ADD COLUMN include_email boolean NOT NULL DEFAULT false;

-- ---------------------------------------------------------------- the index --

-- The rows that may be app events (the actions of siwa.app_events_of, as
-- the replay lists them), by team and seq: a page of the feed is one range
-- scan from its cursor, whatever else the trail holds. A purge's
-- job.completed and job.discarded rows are events; those of other kinds'
-- jobs (a discarded delivery's among them) are in the index and map to no
-- event. Built once here, reading the trail; then one entry per event row.
CREATE INDEX audit_log_app_events_idx ON siwa.audit_log (apple_team, seq)
    WHERE action IN ('notification.recorded', 'user.signed_in', 'user.deletion_requested', 'user.transferred',
                     'token.invalid_grant', 'purge.cancelled', 'job.completed', 'job.discarded');

-- ----------------------------------------------------------------- the feed --

-- The events of `feed_team` after (`from_seq`, `from_position`), in order,
-- at most `how_many`: its recorded rows (and, when `with_teamless`, those
-- written before sql/024, which name no team: a siwa serving one team
-- passes true) by the index above, a range scan per part merged in seq
-- order, each row mapped to its events by siwa.app_events_of.
CREATE FUNCTION siwa.app_events_after(feed_team text, with_teamless boolean, from_seq bigint, from_position integer,
                                      how_many integer)
RETURNS TABLE (seq bigint, recorded_at timestamptz, event_position integer, event_type text)
LANGUAGE sql STABLE AS $$
    SELECT c.seq, c.occurred_at, e.event_position, e.event_type
    FROM (
        (SELECT a.seq, a.action, a.details, a.apple_sub, a.occurred_at FROM siwa.audit_log AS a
         WHERE a.action IN ('notification.recorded', 'user.signed_in', 'user.deletion_requested', 'user.transferred',
                            'token.invalid_grant', 'purge.cancelled', 'job.completed', 'job.discarded')
           AND a.apple_team = feed_team AND a.seq >= from_seq
         ORDER BY a.seq)
        UNION ALL
        (SELECT a.seq, a.action, a.details, a.apple_sub, a.occurred_at FROM siwa.audit_log AS a
         WHERE a.action IN ('notification.recorded', 'user.signed_in', 'user.deletion_requested', 'user.transferred',
                            'token.invalid_grant', 'purge.cancelled', 'job.completed', 'job.discarded')
           AND a.apple_team IS NULL AND with_teamless AND a.seq >= from_seq
         ORDER BY a.seq)
        ORDER BY seq
    ) AS c,
    LATERAL siwa.app_events_of(c.action, c.details,
        CASE WHEN c.action IN ('job.completed', 'job.discarded')
             THEN siwa.app_event_job_kind((c.details->>'job_id')::bigint, c.apple_sub, c.seq) END) AS e
    WHERE (c.seq, e.event_position) > (from_seq, from_position)
    ORDER BY c.seq, e.event_position
    LIMIT how_many
$$;
REVOKE ALL ON FUNCTION siwa.app_events_after(text, boolean, bigint, integer, integer) FROM PUBLIC;

-- One page of the feed: the events after the cursor (`after_seq`,
-- `after_position`; NULL: from the oldest event inside the window), at most
-- `feed_limit` and one more (the caller answers has_more from it).
--
-- `cursor_state` is `ok` on every row, or one row alone says why there is
-- no page: `unknown` (the cursor names no event siwa recorded) or `expired`
-- (the first event after it aged out of the window unread: answering the
-- rest would skip it). A cursor older than the window with nothing after it
-- that aged out is still good: nothing was missed.
--
-- Each event's body is siwa.app_event_payload's, as the worker's claim
-- builds it (siwa.app_event_body, sql/024), with the workers' email switch.
-- Past the first event, every later one is answered whatever its age: seq
-- order and the recording times differ by up to a transaction's length,
-- and the window must never drop an event from the middle of the feed.
CREATE FUNCTION siwa.app_events_feed(feed_team text, with_teamless boolean, after_seq bigint, after_position integer,
                                     feed_limit integer, retention interval)
RETURNS TABLE (cursor_state text, event_id text, event_type text, occurred_at text, data text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cutoff timestamptz := now() - retention;
    include_email boolean := coalesce((SELECT w.include_email FROM siwa.app_webhook AS w), false);
    start_seq bigint := after_seq;
    start_position integer := after_position;
    low bigint;
    high bigint;
    probe timestamptz;
BEGIN
    IF feed_limit IS NULL OR feed_limit < 1 OR retention IS NULL THEN
        RAISE EXCEPTION 'siwa.app_events_feed: a limit of at least 1 and a retention' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF after_seq IS NOT NULL THEN
        IF NOT EXISTS (SELECT FROM siwa.audit_log AS a,
                              siwa.app_events_of(a.action, a.details,
                                  CASE WHEN a.action IN ('job.completed', 'job.discarded')
                                       THEN siwa.app_event_job_kind((a.details->>'job_id')::bigint, a.apple_sub, a.seq) END) AS e
                       WHERE a.seq = after_seq AND e.event_position = after_position) THEN
            RETURN QUERY SELECT 'unknown', NULL::text, NULL::text, NULL::text, NULL::text;
            RETURN;
        END IF;
        IF (SELECT n.recorded_at < cutoff
            FROM siwa.app_events_after(feed_team, with_teamless, after_seq, after_position, 1) AS n) THEN
            RETURN QUERY SELECT 'expired', NULL::text, NULL::text, NULL::text, NULL::text;
            RETURN;
        END IF;
    ELSE
        -- The window's first row, by bisection over the trail's primary
        -- key (recording times grow with seq): some forty probes, where a
        -- scan for the first young row would read the whole past.
        SELECT min(a.seq), max(a.seq) INTO low, high FROM siwa.audit_log AS a;
        IF low IS NULL THEN
            RETURN;
        END IF;
        WHILE low < high LOOP
            SELECT a.occurred_at INTO probe FROM siwa.audit_log AS a
            WHERE a.seq >= low + (high - low) / 2 ORDER BY a.seq LIMIT 1;
            IF probe >= cutoff THEN
                high := low + (high - low) / 2;
            ELSE
                low := low + (high - low) / 2 + 1;
            END IF;
        END LOOP;
        -- Every event of the row before the window's first is behind the cursor.
        start_seq := low - 1;
        start_position := 2147483647;
    END IF;
    RETURN QUERY
    SELECT 'ok', 'evt_' || page.seq || '_' || page.event_position, page.event_type, body.occurred_at, body.data::text
    FROM siwa.app_events_after(feed_team, with_teamless, start_seq, start_position, feed_limit + 1) AS page,
         siwa.app_event_payload(page.seq, page.event_type, include_email) AS body
    ORDER BY page.seq, page.event_position;
END $$;
REVOKE ALL ON FUNCTION siwa.app_events_feed(text, boolean, bigint, integer, integer, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION siwa.app_events_feed(text, boolean, bigint, integer, integer, interval) TO siwa_admin;

INSERT INTO siwa.runtime_grants (migration, position, process, why, statement) VALUES
    (27, 1, 'serve', 'GET /v1/events: the app events feed, read through its function only (serve reads no audit row itself)',
        'GRANT EXECUTE ON FUNCTION siwa.app_events_feed(text, boolean, bigint, integer, integer, interval) TO %I');
