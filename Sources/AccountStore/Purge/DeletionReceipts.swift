import Foundation
import Logging
import PostgresNIO

/// What a deletion receipt states about one completed purge, read in the
/// transaction that completes it (so the times are the ones committed).
/// Internal ids, the Apple sub, event types, times and Apple's HTTP
/// statuses: no email, name or token.
public struct PurgeFacts: Sendable, Equatable {
    public struct Step: Sendable, Equatable {
        public let name: String
        public let completedAt: Date
    }

    /// One `token.revoked` audit row of the job: Apple's `/auth/revoke` answer.
    public struct Revocation: Sendable, Equatable {
        public let clientID: String
        public let appleStatus: Int
    }

    public let jobID: Int64
    public let appleSub: String
    public let appleTeam: String
    /// The notification's `aud`, else the user's latest client id.
    public let clientID: String?
    /// The job's `event_type` (account-delete, app-deletion, ...); nil for a job enqueued by hand.
    public let eventType: String?
    /// Apple's `event_time` for a notification; when siwa received the
    /// request for events of its own (app-deletion, token-invalid-grant).
    public let eventTime: Date?
    public let requestedAt: Date
    public let completedAt: Date
    /// In the order they completed.
    public let steps: [Step]
    public let revocations: [Revocation]
    /// Client ids of tokens an operator deleted unrevoked while the purge
    /// was pending (`siwa tokens forget`): the user revokes those at Apple by hand.
    public let forgottenClientIDs: [String]

    public init(jobID: Int64, appleSub: String, appleTeam: String, clientID: String?, eventType: String?, eventTime: Date?,
                requestedAt: Date, completedAt: Date, steps: [Step], revocations: [Revocation], forgottenClientIDs: [String]) {
        self.jobID = jobID
        self.appleSub = appleSub
        self.appleTeam = appleTeam
        self.clientID = clientID
        self.eventType = eventType
        self.eventTime = eventTime
        self.requestedAt = requestedAt
        self.completedAt = completedAt
        self.steps = steps
        self.revocations = revocations
        self.forgottenClientIDs = forgottenClientIDs
    }
}

/// A receipt as signed: its `jti`, the signing key's id and the compact JWS.
public struct SignedReceipt: Sendable, Equatable {
    public let jti: String
    public let keyID: String
    public let jws: String

    public init(jti: String, keyID: String, jws: String) {
        self.jti = jti
        self.keyID = keyID
        self.jws = jws
    }
}

/// Signs a receipt for a completed purge (AccountLifecycle's DeletionReceiptSigner).
public protocol ReceiptSigning: Sendable {
    func sign(_ facts: PurgeFacts) throws -> SignedReceipt
}

/// siwa.deletion_receipts: written by the worker in the transaction that
/// completes a purge (`issue`), read by admins (`forUser`).
public struct DeletionReceipts: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// `{"receipts": [JWS, ...]}`, as `siwa receipts show --json` and
    /// `GET /admin/receipts/{sub}` answer (`AnswerJSON`).
    public struct List: Encodable, Sendable {
        public let receipts: [String]

        public init(receipts: [String]) { self.receipts = receipts }
    }

    /// The user's receipts (compact JWS), newest first; with no team, the
    /// sub's in every team.
    public func forUser(_ appleSub: String, team: String? = nil) async throws -> [String] {
        try await client.guardedQuery("""
            SELECT receipt FROM siwa.deletion_receipts
            WHERE apple_sub = \(appleSub) AND (\(team)::text IS NULL OR apple_team = \(team)::text)
            ORDER BY issued_at DESC, id DESC
            """, logger: logger).map { try $0.decode(String.self) }
    }

    /// Signs and stores a receipt for each of `jobIDs` that this
    /// transaction has just completed as a purge, with an audit row
    /// `receipt.issued` each. Token-only sign-outs (args.scope `tokens`) are
    /// not purges and get none. A signing or insert error fails the
    /// transaction, and with it the completion: no purge completes without
    /// its receipt.
    static func issue(for jobIDs: [Int64], signer: any ReceiptSigning, on connection: PostgresConnection,
                      logger: Logger) async throws {
        var signed: [(jobID: Int64, sub: String, team: String, receipt: SignedReceipt)] = []
        for facts in try await Self.facts(for: jobIDs, on: connection, logger: logger) {
            signed.append((facts.jobID, facts.appleSub, facts.appleTeam, try signer.sign(facts)))
        }
        guard !signed.isEmpty else { return }
        try await connection.query("""
            WITH receipt AS (
                INSERT INTO siwa.deletion_receipts (job_id, apple_sub, apple_team, jti, key_id, receipt)
                SELECT * FROM unnest(\(signed.map { $0.jobID })::bigint[], \(signed.map { $0.sub })::text[],
                                     \(signed.map { $0.team })::text[],
                                     \(signed.map { $0.receipt.jti })::text[], \(signed.map { $0.receipt.keyID })::text[],
                                     \(signed.map { $0.receipt.jws })::text[])
                RETURNING job_id, apple_sub, apple_team, jti, key_id
            )
            INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
            SELECT 'worker', 'receipt.issued', apple_sub, apple_team, jsonb_build_object('job_id', job_id, 'jti', jti, 'kid', key_id)
            FROM receipt ORDER BY job_id
            """, logger: logger)
    }

    /// The facts of the completed purges among `jobIDs`. The steps: those
    /// of `steps_done` whose `job.step_completed` audit rows this worker's
    /// role wrote (siwa.steps_without_evidence, sql/017), never what the
    /// job row alone claims; the completion itself is refused when a step
    /// lacks its row (trigger jobs_check_purge_completion). The event's time:
    /// Apple's `event_time` of the job's notification (same jti and type),
    /// else the audit row of siwa's own event for the job (or the job it
    /// reruns). Revocations: the job's `token.revoked` audit rows;
    /// forgotten tokens: the user's `token.forgotten` rows since the job
    /// was enqueued.
    static func facts(for jobIDs: [Int64], on connection: PostgresConnection, logger: Logger) async throws -> [PurgeFacts] {
        let rows = try await connection.query("""
            SELECT j.id, j.args->>'apple_sub', j.args->>'apple_team',
                   coalesce((SELECT n.audience FROM siwa.notifications AS n WHERE n.jti = j.args->>'jti'),
                            (SELECT u.client_id FROM siwa.users AS u
                             WHERE u.apple_sub = j.args->>'apple_sub' AND u.apple_team = j.args->>'apple_team')),
                   j.args->>'event_type',
                   extract(epoch FROM coalesce(
                       (SELECT to_timestamp(n.event_time / 1000.0) FROM siwa.notifications AS n
                        WHERE n.jti = j.args->>'jti' AND n.event_type = j.args->>'event_type'),
                       (SELECT a.occurred_at FROM siwa.audit_log AS a
                        WHERE a.apple_sub = j.args->>'apple_sub' AND a.action IN ('user.deletion_requested', 'token.invalid_grant')
                          AND a.details->>'job_id' IN (j.id::text, j.args->>'rerun_of')
                        ORDER BY a.seq DESC LIMIT 1)))::float8,
                   extract(epoch FROM j.created_at)::float8, extract(epoch FROM j.finalized_at)::float8,
                   ARRAY(SELECT s.key FROM jsonb_each_text(j.steps_done) AS s WHERE s.key <> ALL(shown.missing)
                         ORDER BY s.value::timestamptz, s.key),
                   ARRAY(SELECT extract(epoch FROM s.value::timestamptz)::float8 FROM jsonb_each_text(j.steps_done) AS s
                         WHERE s.key <> ALL(shown.missing) ORDER BY s.value::timestamptz, s.key),
                   ARRAY(SELECT a.details->>'client_id' FROM siwa.audit_log AS a
                         WHERE a.apple_sub = j.args->>'apple_sub' AND a.action = 'token.revoked' AND a.details->>'job_id' = j.id::text
                         ORDER BY a.seq),
                   ARRAY(SELECT (a.details->>'apple_status')::integer FROM siwa.audit_log AS a
                         WHERE a.apple_sub = j.args->>'apple_sub' AND a.action = 'token.revoked' AND a.details->>'job_id' = j.id::text
                         ORDER BY a.seq),
                   ARRAY(SELECT a.details->>'client_id' FROM siwa.audit_log AS a
                         WHERE a.apple_sub = j.args->>'apple_sub' AND a.action = 'token.forgotten' AND a.occurred_at >= j.created_at
                           AND coalesce(a.apple_team, j.args->>'apple_team') = j.args->>'apple_team'
                         ORDER BY a.seq)
            FROM siwa.jobs AS j,
                 LATERAL (SELECT siwa.steps_without_evidence(j.id, j.args->>'apple_sub', ARRAY(SELECT jsonb_object_keys(j.steps_done)))
                          AS missing) AS shown
            WHERE j.id = ANY(\(jobIDs)::bigint[]) AND j.kind = \(PurgeParameters.kind) AND j.state = 'completed'
              AND j.args->>'scope' IS DISTINCT FROM 'tokens' AND j.args->>'apple_sub' <> '' AND j.args->>'apple_team' <> ''
            ORDER BY j.id
            """, logger: logger)
        var facts: [PurgeFacts] = []
        for try await row in rows {
            let (id, sub, team, clientID, eventType, eventTime, requested, completed, stepNames, stepTimes, clients, statuses, forgotten) =
                try row.decode((Int64, String, String, String?, String?, Double?, Double, Double, [String], [Double], [String], [Int32],
                                [String]).self)
            facts.append(PurgeFacts(
                jobID: id, appleSub: sub, appleTeam: team, clientID: clientID, eventType: eventType, eventTime: eventTime.map(Date.init(timeIntervalSince1970:)),
                requestedAt: Date(timeIntervalSince1970: requested), completedAt: Date(timeIntervalSince1970: completed),
                steps: zip(stepNames, stepTimes).map { PurgeFacts.Step(name: $0, completedAt: Date(timeIntervalSince1970: $1)) },
                revocations: zip(clients, statuses).map { PurgeFacts.Revocation(clientID: $0, appleStatus: Int($1)) },
                forgottenClientIDs: forgotten))
        }
        return facts
    }
}
