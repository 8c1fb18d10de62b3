import Foundation
import PostgresNIO

/// The one statement that records a batch of notifications and applies their
/// effects: one round trip for a whole group-commit batch.
///
/// The entries arrive as parallel arrays (`unnest ... WITH ORDINALITY`).
/// Every step hangs off the inbox insert's RETURNING, so a duplicate `jti`
/// (ON CONFLICT DO NOTHING returns no row) changes nothing at all. The user
/// upsert applies the rules that make late delivery harmless: an email state
/// only replaces an older one (by `event_time`), consent revocation only
/// replaces an older active state, a deleted user is never touched again,
/// and a status event older than the user's latest sign-in changes nothing.
/// The purge job is enqueued by siwa.enqueue_purge (sql/008), once per
/// purge or sign-out of the batch; its insert trigger wakes the workers when
/// the transaction commits (sql/002_queue.sql). With the app webhook on
/// (siwa.app_webhook, sql/014), each recorded notification's deliveries to
/// the app are enqueued here too, one insert for the batch, keyed by the
/// notification's audit row.
///
/// One statement cannot touch the same row twice (ON CONFLICT DO UPDATE
/// refuses), so a batch must not repeat a `jti` or a user (team and sub):
/// `RecordNotificationStatement.rounds(of:)` splits a batch into such rounds.
///
/// PostgresNIO binds no NULL inside an array, so optional values travel as
/// text with '' for "absent" (an email is never empty).
///
/// `siwa-bench` (`make bench`) runs this same text under pgbench, one
/// notification per transaction, to measure the ceiling.
public struct RecordNotificationStatement: PostgresPreparedStatement {
    public static let name = "siwa_record_notifications_v11"

    public static let sql = """
        WITH input AS (
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::timestamptz[],
                                 $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::boolean[], $13::integer[],
                                 $14::text[])
                WITH ORDINALITY AS i(jti, event_type, apple_sub, event_time, audience, issued_at,
                                     claims, forwarding, email, is_private_email, status, purge, purge_delay, apple_team, ord)
        ), known AS MATERIALIZED (
            -- The users of this batch, locked before anything is decided and
            -- read as they are now: FOR UPDATE waits for a concurrent
            -- deletion (or the worker's erase, or a sign-in) to commit and
            -- returns the row it left, where the statement's snapshot would
            -- show the old one. The worker's erase locks the same rows
            -- first, so an email stored below is either seen by the erase or
            -- dropped here. (Anything else read under the lock is read in
            -- siwa.enqueue_purge, on a snapshot of its own: see `jobs`.)
            --
            -- One index probe per sub, whatever the statistics say: LIMIT
            -- keeps the lateral lookup from being flattened into a join,
            -- which the planner would hash over a scan of every user while
            -- the table is small or unanalysed (and keep in the cached plan
            -- as it grows).
            SELECT u.apple_sub, u.apple_team, u.status, u.signed_in_ms
            FROM (SELECT apple_sub, apple_team FROM input ORDER BY apple_sub, apple_team) AS batch,
                 -- An active user's status_event_time is their latest sign-in
                 -- (the identity token's iat), if they signed in.
                 LATERAL (SELECT apple_sub, apple_team, status,
                                 CASE WHEN status = 'active' THEN status_event_time END AS signed_in_ms
                          FROM siwa.users WHERE users.apple_sub = batch.apple_sub AND users.apple_team = batch.apple_team
                          LIMIT 1 FOR UPDATE) AS u
        ), decided AS (
            -- A consent revocation older than the user's latest sign-in
            -- changes nothing: the user came back after it (an account
            -- deletion is never stale). One for a user already deleted
            -- adds no purge (Apple sends it after siwa's own revocation).
            -- A consent revocation under `sign_out` (no purge) still
            -- revokes and deletes the user's Apple tokens, if they hold
            -- any: a token-only job (args.scope).
            SELECT input.jti, input.event_type, input.apple_sub, input.apple_team, input.event_time, input.audience, input.issued_at,
                   input.claims, input.forwarding, input.email, input.is_private_email, input.ord, input.purge_delay,
                   CASE WHEN stale THEN '' ELSE input.status END AS status,
                   input.status = 'consent_revoked' AS revocation,
                   input.purge AND NOT stale
                       AND NOT (input.status = 'consent_revoked' AND coalesce(known.status, '') = 'deleted') AS purge,
                   input.status = 'consent_revoked' AND NOT input.purge AND NOT stale AS sign_out,
                   stale
            FROM input LEFT JOIN known USING (apple_sub, apple_team),
                 LATERAL (SELECT input.status = 'consent_revoked'
                                 AND input.event_time <= coalesce(known.signed_in_ms, -9223372036854775808) AS stale) AS s
        ), inbox AS (
            INSERT INTO siwa.notifications (jti, event_type, apple_sub, apple_team, event_time, audience, issued_at, claims)
            -- A user who revoked consent or was deleted is (being) purged:
            -- a late event's email address is not kept.
            SELECT jti, event_type, apple_sub, apple_team, event_time, audience, issued_at,
                   CASE WHEN EXISTS (SELECT FROM known WHERE known.apple_sub = input.apple_sub
                                                         AND known.apple_team = input.apple_team AND status <> 'active')
                        THEN claims::jsonb #- '{events,email}' ELSE claims::jsonb END
            -- Every row here belongs to a sub of this batch, and a sub has
            -- one writer (InboxWriter), so concurrent batches share no row.
            FROM input ORDER BY jti
            ON CONFLICT (jti) DO NOTHING
            RETURNING id, jti
        ), fresh AS (
            SELECT decided.*, inbox.id AS notification_id FROM decided JOIN inbox USING (jti)
        ), account AS (
            INSERT INTO siwa.users AS u (apple_sub, apple_team, client_id, status, status_event_time, email, is_private_email,
                                         email_forwarding_enabled, email_event_time)
            SELECT apple_sub, apple_team, audience, coalesce(nullif(status, ''), 'active'),
                   CASE WHEN status <> '' THEN event_time END,
                   nullif(email, ''), nullif(is_private_email, '')::boolean,
                   coalesce(nullif(forwarding, '')::boolean, true), CASE WHEN forwarding <> '' THEN event_time END
            FROM fresh ORDER BY apple_sub, apple_team
            ON CONFLICT (apple_sub, apple_team) DO UPDATE SET
                client_id = excluded.client_id,
                -- excluded.email_event_time is set only by an email event;
                -- NULL > x is NULL, so other events leave the email state alone.
                email_forwarding_enabled = CASE WHEN excluded.email_event_time > coalesce(u.email_event_time, -9223372036854775808)
                                                THEN excluded.email_forwarding_enabled ELSE u.email_forwarding_enabled END,
                email = CASE WHEN excluded.email_event_time > coalesce(u.email_event_time, -9223372036854775808)
                                  AND u.status = 'active'
                             THEN coalesce(excluded.email, u.email) ELSE u.email END,
                is_private_email = CASE WHEN excluded.email_event_time > coalesce(u.email_event_time, -9223372036854775808)
                                             AND u.status = 'active'
                                        THEN coalesce(excluded.is_private_email, u.is_private_email) ELSE u.is_private_email END,
                email_event_time = greatest(u.email_event_time, excluded.email_event_time),
                -- excluded.status_event_time is set only by a status event.
                status = CASE WHEN excluded.status = 'deleted' THEN 'deleted'
                              WHEN excluded.status = 'consent_revoked' AND u.status = 'active'
                                   AND excluded.status_event_time > coalesce(u.status_event_time, -9223372036854775808)
                              THEN 'consent_revoked'
                              ELSE u.status END,
                status_event_time = CASE WHEN excluded.status = 'deleted'
                                           OR (excluded.status = 'consent_revoked' AND u.status = 'active'
                                               AND excluded.status_event_time > coalesce(u.status_event_time, -9223372036854775808))
                                         THEN excluded.status_event_time ELSE u.status_event_time END,
                updated_at = now()
            WHERE u.status <> 'deleted'
            RETURNING u.apple_sub, u.apple_team, u.status
        ), effect AS MATERIALIZED (
            -- Decided again once the user's row is written (joining the
            -- upsert's rows waits for it): a user `known` did not find may
            -- have been inserted meanwhile by a first sign-in, which the
            -- upsert waited for; a consent revocation older than it left
            -- the user active, and is stale after all.
            -- `revoked`: this consent revocation set the user's status
            -- (the app's `consent.revoked`, sql/014).
            -- `purge_after`: a consent revocation's purge waits out the
            -- grace delay (SIWA_CONSENT_REVOKED_PURGE_DELAY_DAYS; sql/015).
            SELECT fresh.ord, fresh.jti, fresh.event_type, fresh.apple_sub, fresh.apple_team, fresh.event_time, fresh.notification_id,
                   fresh.revocation, fresh.purge AND NOT late AS purge, fresh.sign_out AND NOT late AS sign_out, fresh.stale OR late AS stale,
                   coalesce(fresh.revocation AND account.status = 'consent_revoked', false) AS revoked,
                   CASE WHEN fresh.purge AND fresh.purge_delay > 0
                        THEN siwa.utc_iso(now() + make_interval(secs => fresh.purge_delay)) END AS purge_after
            FROM fresh LEFT JOIN account USING (apple_sub, apple_team),
                 LATERAL (SELECT fresh.revocation AND coalesce(account.status = 'active', false) AS late) AS l
        ), jobs AS MATERIALIZED (
            -- One pending purge per user (see `jobs_one_pending_purge_idx`);
            -- how a new one merges into it, and why a sign-out checks the
            -- user's tokens there and not here, is siwa.enqueue_purge's
            -- (sql/008). Apple's events renotify: the downstream hears of
            -- the latest one.
            SELECT effect.apple_sub, effect.apple_team, job.job_id AS id, job.inserted
            FROM effect, LATERAL siwa.enqueue_purge(effect.apple_sub, effect.apple_team, effect.event_type, effect.jti,
                                                    NOT effect.purge, true,
                                                    jsonb_strip_nulls(jsonb_build_object('purge_after', effect.purge_after))) AS job
            WHERE effect.purge OR effect.sign_out
        ), audit AS (
            INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
            -- Only what applies is written (a key per byte of the row, in
            -- the log once more): the job ids a purge or sign-out has, and
            -- `older_than_sign_in` and `consent_revoked` for a consent
            -- revocation, the only event either can be true for
            -- (siwa.app_event_payload, sql/021, says false for the others).
            SELECT 'apple', 'notification.recorded', effect.apple_sub, effect.apple_team,
                   jsonb_strip_nulls(jsonb_build_object(
                       'jti', effect.jti, 'event_type', effect.event_type, 'notification_id', effect.notification_id,
                       'event_time', effect.event_time, 'purge', effect.purge,
                       'purge_job_id', CASE WHEN jobs.inserted AND effect.purge THEN jobs.id END,
                       'purge_merged_into_job_id', CASE WHEN NOT jobs.inserted AND effect.purge THEN jobs.id END,
                       'sign_out_job_id', CASE WHEN effect.sign_out THEN jobs.id END,
                       'older_than_sign_in', CASE WHEN effect.revocation THEN effect.stale END,
                       'consent_revoked', CASE WHEN effect.revocation THEN effect.revoked END,
                       'purge_after', effect.purge_after))
            FROM effect LEFT JOIN jobs USING (apple_sub, apple_team) ORDER BY effect.ord
            RETURNING seq, apple_sub, apple_team, details
        ), deliveries AS (
            -- The app's backend hears of each (sql/014): one delivery per
            -- app event of the row, the row's seq its id, in the batch's
            -- order; nothing at all while the webhook is off.
            INSERT INTO siwa.jobs (kind, args, run_at)
            SELECT 'app_event', siwa.app_event_args(audit.seq, audit.apple_sub, audit.apple_team, e.event_position, e.event_type),
                   siwa.app_event_run_at(audit.apple_sub)
            FROM audit, siwa.app_events_of('notification.recorded', audit.details, NULL) AS e
            WHERE (SELECT enabled FROM siwa.app_webhook)
            ORDER BY audit.seq, e.event_position
            RETURNING id
        ), wake AS (
            -- Only when no delivery was waiting (this statement's snapshot
            -- does not see its own): a NOTIFY serializes commits (sql/014).
            SELECT pg_notify('siwa_jobs', 'app_event')
            WHERE EXISTS (SELECT FROM deliveries) AND siwa.app_events_idle()
        )
        SELECT input.ord, effect.notification_id, CASE WHEN jobs.inserted AND effect.purge THEN jobs.id END
        FROM input LEFT JOIN effect USING (ord)
             LEFT JOIN jobs ON jobs.apple_sub = effect.apple_sub AND jobs.apple_team = effect.apple_team,
             (SELECT count(*) FROM wake) AS woken
        ORDER BY input.ord
        """

    /// Position in the batch (1-based), notification id (nil: duplicate), new purge job id.
    public typealias Row = (Int64, Int64?, Int64?)

    /// No `jti` and no user twice (see `rounds(of:)`).
    public var entries: [InboxEntry]

    public init(entries: [InboxEntry]) { self.entries = entries }

    public func makeBindings() throws -> PostgresBindings {
        var b = PostgresBindings(capacity: 14)
        b.append(entries.map(\.jti))
        b.append(entries.map(\.eventType))
        b.append(entries.map(\.appleSub))
        b.append(entries.map(\.eventTime))
        b.append(entries.map(\.audience))
        b.append(entries.map(\.issuedAt))
        b.append(entries.map(\.claimsJSON))
        b.append(entries.map { Self.text($0.effect.emailForwardingEnabled) })
        b.append(entries.map { $0.effect.email ?? "" })
        b.append(entries.map { Self.text($0.effect.isPrivateEmail) })
        b.append(entries.map { $0.effect.status?.rawValue ?? "" })
        b.append(entries.map(\.effect.enqueuePurge))
        b.append(entries.map { Int32(clamping: $0.effect.purgeDelaySeconds) })
        b.append(entries.map(\.appleTeam))
        return b
    }

    private static func text(_ flag: Bool?) -> String {
        flag.map { $0 ? "true" : "false" } ?? ""
    }

    public func decodeRow(_ row: PostgresRow) throws -> Row {
        try row.decode(Row.self)
    }

    public static func outcome(of row: Row) -> InboxOutcome {
        guard let notificationID = row.1 else { return .duplicate }
        return .recorded(notificationID: notificationID, purgeJobID: row.2)
    }

    /// Splits a batch into rounds that repeat no `jti` and no user, keeping
    /// arrival order per user (a later event for a user runs in a later
    /// round, in the same transaction). Returns indices into `entries`.
    public static func rounds(of entries: [InboxEntry]) -> [[Int]] {
        var rounds: [[Int]] = []
        var nextRoundForUser: [UserKey: Int] = [:]
        var nextRoundForJTI: [String: Int] = [:]
        for (index, entry) in entries.enumerated() {
            let user = UserKey(sub: entry.appleSub, team: entry.appleTeam)
            let round = max(nextRoundForUser[user, default: 0], nextRoundForJTI[entry.jti, default: 0])
            if round == rounds.count { rounds.append([]) }
            rounds[round].append(index)
            nextRoundForUser[user] = round + 1
            nextRoundForJTI[entry.jti] = round + 1
        }
        return rounds
    }

    private struct UserKey: Hashable {
        let sub: String
        let team: String
    }
}
