import Foundation
import Logging
import PostgresNIO

public enum JobState: String, Sendable, CaseIterable, Codable {
    case available, running, retryable, completed, discarded, cancelled
}

/// A job as `siwa jobs` shows it. Args are reduced to the Apple sub and
/// event type: nothing else belongs in a purge job.
public struct JobSummary: Sendable, Codable, Equatable {
    public let id: Int64
    public let kind: String
    public let appleSub: String?
    public let eventType: String?
    public let state: JobState
    public let attempt: Int
    public let maxAttempts: Int
    public let runAt: Date
    public let createdAt: Date
    public let attemptedAt: Date?
    public let finalizedAt: Date?
    public let lockedBy: String?
    public let lockedUntil: Date?
    /// JSON text: [{"attempt","at","step","error","worker"}, ...]
    public let errors: String
    /// JSON text: {"step name": "completed at", ...}
    public let stepsDone: String
}

extension JobSummary {
    /// Jobs as JSON values (`siwa jobs --json`, `GET /admin/jobs`): snake
    /// case keys, ISO 8601 times, and `errors` and `steps_done` as JSON
    /// values rather than strings of JSON.
    public static func jsonObjects(_ jobs: [JobSummary]) throws -> [[String: Any]] {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let plain = try JSONSerialization.jsonObject(with: try encoder.encode(jobs)) as? [[String: Any]] ?? []
        return plain.map { job in
            var job = job
            for key in ["errors", "steps_done"] {
                if let text = job[key] as? String, let value = try? JSONSerialization.jsonObject(with: Data(text.utf8)) {
                    job[key] = value
                }
            }
            return job
        }
    }
}

/// What an admin asked of a job, refused with a reason an operator can act on.
public struct JobAdministrationError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable { case notFound, conflict }
    public let description: String
    /// For the admin listener's answer (404 or 409).
    public let kind: Kind

    public init(description: String, kind: Kind) {
        self.description = description
        self.kind = kind
    }
}

/// Who retries or cancels a job, as the audit row names them.
public enum JobActor: Sendable {
    /// `siwa jobs`: an admin's own database role. Actor `admin`; the role
    /// is `db_user` (and `admin`, the name older rows used), and the login
    /// name the caller's environment tells is only `login_hint`.
    case databaseRole(loginHint: String?)
    /// The admin listener: actor `admin_key:NAME`, with `api_key` (the
    /// name) and `api_key_id` in the details; `db_user` is then the
    /// runtime role serve connects as.
    case adminKey(APIKeyIdentity)

    var auditActor: String {
        switch self {
        case .databaseRole: "admin"
        case .adminKey(let key): "admin_key:" + key.name
        }
    }

    var key: APIKeyIdentity? {
        if case .adminKey(let key) = self { key } else { nil }
    }

    var loginHint: String? {
        if case .databaseRole(let hint) = self { hint } else { nil }
    }
}

/// `siwa jobs` and the admin listener: read the queue, and retry or cancel
/// a job, each change written to the audit trail with the acting admin.
///
/// For `siwa jobs`:
/// Who acted is the database role the command logged in as
/// (`session_user`): the one thing about the caller that an environment
/// variable cannot change, as long as each admin has a role of their own
/// (members of `siwa_admin`, see deploy/README.md). The login name on the
/// machine is recorded too, but only as a hint (`siwa jobs` takes
/// `SUDO_USER`, `logname` or `USER`, which the caller controls).
public struct JobAdministration: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    static let columns = """
        id, kind, args->>'apple_sub', args->>'event_type', state, attempt, max_attempts, run_at, created_at,
        attempted_at, finalized_at, locked_by, locked_until, errors::text, steps_done::text
        """

    /// Jobs, newest first; only those in `state` and of `kind` when given.
    public func list(state: JobState?, kind: String? = nil, limit: Int) async throws -> [JobSummary] {
        let rows = try await client.guardedQuery("""
            SELECT \(unescaped: Self.columns) FROM siwa.jobs
            WHERE (\(state?.rawValue)::text IS NULL OR state = \(state?.rawValue)::text)
              AND (\(kind)::text IS NULL OR kind = \(kind)::text)
            ORDER BY id DESC LIMIT \(limit)
            """, logger: logger)
        return try Self.summaries(rows)
    }

    /// A job kind's name as siwa writes them (`purge_user`, `app_event`):
    /// 1 to 64 lower-case letters, digits and underscores. What `--kind` and
    /// `?kind=` accept.
    public static func isKindName(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count) && text.utf8.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 95 }
    }

    public func show(id: Int64) async throws -> JobSummary? {
        let rows = try await client.guardedQuery("SELECT \(unescaped: Self.columns) FROM siwa.jobs WHERE id = \(id)", logger: logger)
        return try Self.summaries(rows).first
    }

    /// Makes a job run again now: from `discarded`, `cancelled`, `retryable`
    /// or `available`. A job that used up its attempts gets one more (as
    /// River does); its error history stays.
    public func retry(id: Int64, by actor: JobActor) async throws -> JobSummary {
        try await change(id: id, actor: actor, action: "job.retry", allowedFrom: [.discarded, .cancelled, .retryable, .available], update: """
            state = 'available', run_at = now(), finalized_at = NULL,
            max_attempts = greatest(max_attempts, attempt + 1)
            """)
    }

    /// Stops a job that has not started: from `available` or `retryable`.
    public func cancel(id: Int64, by actor: JobActor) async throws -> JobSummary {
        try await change(id: id, actor: actor, action: "job.cancel", allowedFrom: [.available, .retryable], update: """
            state = 'cancelled', finalized_at = now()
            """)
    }

    /// The audit row's details: `job_id`, `new_state`, `db_user` (the
    /// database role that acted: `session_user`, which `SET ROLE` does not
    /// change), and the actor's own (`JobActor`).
    private func change(id: Int64, actor: JobActor, action: String, allowedFrom: [JobState], update: String) async throws -> JobSummary {
        let allowed = allowedFrom.map(\.rawValue)
        do {
            let changed = try await client.withGuardedTransaction(logger: logger) { connection -> Bool in
                let rows = try await connection.query("""
                    WITH job AS (
                        UPDATE siwa.jobs SET \(unescaped: update)
                        WHERE id = \(id) AND state = ANY(\(allowed)::text[])
                        RETURNING id, args->>'apple_sub' AS apple_sub, state
                    )
                    INSERT INTO siwa.audit_log (actor, action, apple_sub, details)
                    SELECT \(actor.auditActor), \(action), apple_sub,
                           jsonb_build_object('job_id', id, 'new_state', state, 'db_user', session_user::text)
                           || CASE WHEN \(actor.key?.name)::text IS NULL
                                   THEN jsonb_build_object('admin', session_user::text, 'login_hint', \(actor.loginHint)::text)
                                   ELSE jsonb_build_object('api_key', \(actor.key?.name)::text, 'api_key_id', \(actor.key?.id)::bigint,
                                                           'via', 'admin_http') END
                    FROM job
                    RETURNING seq
                    """, logger: logger)
                var changed = false
                for try await _ in rows.decode(Int64.self) { changed = true }
                return changed
            }
            guard let job = try await show(id: id) else {
                throw JobAdministrationError(description: "no job with id \(id)", kind: .notFound)
            }
            guard changed else {
                throw JobAdministrationError(description: "job \(id) is \(job.state.rawValue); only a job that is \(allowed.joined(separator: ", ")) can be changed this way", kind: .conflict)
            }
            return job
        } catch let error as PSQLError {
            if error.serverInfo?[.sqlState] == "23505" {
                throw JobAdministrationError(description: "another purge for the same Apple user is already pending; retry refused (see siwa jobs list)", kind: .conflict)
            }
            throw error
        }
    }

    static func summaries(_ rows: [PostgresRow]) throws -> [JobSummary] {
        var jobs: [JobSummary] = []
        for row in rows {
            let (id, kind, sub, eventType, state, attempt, maxAttempts, runAt, createdAt, attemptedAt, finalizedAt, lockedBy, lockedUntil, errors, steps) =
                try row.decode((Int64, String, String?, String?, String, Int32, Int32, Date, Date, Date?, Date?, String?, Date?, String, String).self)
            jobs.append(JobSummary(id: id, kind: kind, appleSub: sub, eventType: eventType, state: JobState(rawValue: state) ?? .available,
                                   attempt: Int(attempt), maxAttempts: Int(maxAttempts), runAt: runAt, createdAt: createdAt,
                                   attemptedAt: attemptedAt, finalizedAt: finalizedAt, lockedBy: lockedBy, lockedUntil: lockedUntil,
                                   errors: errors, stepsDone: steps))
        }
        return jobs
    }
}
