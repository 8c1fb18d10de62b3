import Foundation
import Logging
import PostgresNIO

public enum JobState: String, Sendable, CaseIterable, Codable {
    case available, running, retryable, completed, discarded, cancelled
}

/// A job as `siwa jobs` shows it. Args are reduced to the Apple sub, its
/// team and the event type: nothing else belongs in a purge job.
public struct JobSummary: Sendable, Equatable {
    public let id: Int64
    public let kind: String
    public let appleSub: String?
    public let appleTeam: String?
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

/// As `siwa jobs --json` and `GET /admin/jobs` show a job (`AnswerJSON`):
/// unset fields left out, times to the second, and `errors` and
/// `steps_done` as JSON values rather than strings of JSON.
extension JobSummary: Encodable {
    enum CodingKeys: String, CodingKey {
        case id, kind, appleSub, appleTeam, eventType, state, attempt, maxAttempts, runAt, createdAt, attemptedAt, finalizedAt
        case lockedBy, lockedUntil, errors, stepsDone
    }

    public func encode(to encoder: any Encoder) throws {
        func time(_ date: Date?) -> String? { date.map { UTCTime.text($0, .seconds) } }
        func json(_ text: String) -> JSONValue { (try? JSONValue(parsing: text)) ?? .string(text) }
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(kind, forKey: .kind)
        try container.encodeIfPresent(appleSub, forKey: .appleSub)
        try container.encodeIfPresent(appleTeam, forKey: .appleTeam)
        try container.encodeIfPresent(eventType, forKey: .eventType)
        try container.encode(state, forKey: .state)
        try container.encode(attempt, forKey: .attempt)
        try container.encode(maxAttempts, forKey: .maxAttempts)
        try container.encodeIfPresent(time(runAt), forKey: .runAt)
        try container.encodeIfPresent(time(createdAt), forKey: .createdAt)
        try container.encodeIfPresent(time(attemptedAt), forKey: .attemptedAt)
        try container.encodeIfPresent(time(finalizedAt), forKey: .finalizedAt)
        try container.encodeIfPresent(lockedBy, forKey: .lockedBy)
        try container.encodeIfPresent(time(lockedUntil), forKey: .lockedUntil)
        try container.encode(json(errors), forKey: .errors)
        try container.encode(json(stepsDone), forKey: .stepsDone)
    }
}

/// What an admin asked of a job, refused with a reason an operator can act on.
public struct JobAdministrationError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable { case notFound, conflict, forbidden }
    public let description: String
    /// For the admin listener's answer (404, 409 or 403).
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

    var key: APIKeyIdentity? {
        if case .adminKey(let key) = self { key } else { nil }
    }
}

/// `siwa jobs` and the admin listener: read the queue, and retry, cancel
/// or run now a job, each change written to the audit trail with the
/// acting admin, by a function of sql/017 (siwa_admin may not write the
/// tables itself).
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
        id, kind, args->>'apple_sub', args->>'apple_team', args->>'event_type', state, attempt, max_attempts, run_at, created_at,
        attempted_at, finalized_at, locked_by, locked_until, errors::text, steps_done::text
        """

    /// Jobs, newest first; only those in `state` and of `kind` when given.
    /// - Parameters: appleSub, team: only the jobs about this user (in
    ///   this team; every team when nil).
    public func list(state: JobState?, kind: String? = nil, appleSub: String? = nil, team: String? = nil,
                     limit: Int) async throws -> [JobSummary] {
        let rows = try await client.guardedQuery("""
            SELECT \(unescaped: Self.columns) FROM siwa.jobs
            WHERE (\(state?.rawValue)::text IS NULL OR state = \(state?.rawValue)::text)
              AND (\(kind)::text IS NULL OR kind = \(kind)::text)
              AND (\(appleSub)::text IS NULL OR args->>'apple_sub' = \(appleSub)::text)
              AND (\(team)::text IS NULL OR args->>'apple_team' = \(team)::text)
            ORDER BY id DESC LIMIT \(limit)
            """, logger: logger)
        return try Self.summaries(rows)
    }

    public func show(id: Int64) async throws -> JobSummary? {
        let rows = try await client.guardedQuery("SELECT \(unescaped: Self.columns) FROM siwa.jobs WHERE id = \(id)", logger: logger)
        return try Self.summaries(rows).first
    }

    /// Makes a job run again now: from `discarded`, `cancelled`, `retryable`
    /// or `available`. A job that used up its attempts gets one more (as
    /// River does); its error history stays.
    public func retry(id: Int64, by actor: JobActor) async throws -> JobSummary {
        try await change(.retry, id: id, by: actor)
    }

    /// Stops a job that has not started: from `available` or `retryable`.
    public func cancel(id: Int64, by actor: JobActor) async throws -> JobSummary {
        try await change(.cancel, id: id, by: actor)
    }

    /// Runs now a job that waits for a time still ahead (`available` or
    /// `retryable`, `run_at` in the future): a consent-revoked purge waiting
    /// out its grace delay, a retry backing off.
    public func runNow(id: Int64, by actor: JobActor) async throws -> JobSummary {
        try await change(.runNow, id: id, by: actor)
    }

    /// What an admin may do to a job: `siwa.change_job` / `change_job_by_key`'s `job_change`.
    public enum Change: String, Sendable {
        case retry, cancel
        case runNow = "run_now"
    }

    /// One SECURITY DEFINER function (sql/017_admin_functions.sql) checks the
    /// change, makes it and writes its audit row (`job.retry`, `job.cancel`,
    /// `job.run_now`), whose details name the acting database role
    /// (`db_user`: `session_user`) and the actor's own (`JobActor`). A refused
    /// change writes nothing and says why in one line.
    public func change(_ change: Change, id: Int64, by actor: JobActor) async throws -> JobSummary {
        do {
            let query: PostgresQuery = switch actor {
            case .databaseRole(let hint): "SELECT siwa.change_job(\(change.rawValue), \(id), \(hint)::text)"
            case .adminKey(let key): "SELECT siwa.change_job_by_key(\(change.rawValue), \(id), \(key.id))"
            }
            _ = try await client.guardedQuery(query, logger: logger)
        } catch let error as PSQLError {
            let message = error.serverInfo?[.message] ?? "refused"
            switch error.serverInfo?[.sqlState] {
            case "P0002": throw JobAdministrationError(description: message, kind: .notFound)
            case "55000": throw JobAdministrationError(description: message, kind: .conflict)
            case "23505":
                throw JobAdministrationError(description: "another purge for the same Apple user is already pending; retry refused (see siwa jobs list)", kind: .conflict)
            case "42501" where actor.key != nil:
                // The key was revoked (or re-scoped) since it was checked.
                throw JobAdministrationError(description: message, kind: .forbidden)
            default: throw error
            }
        }
        guard let job = try await show(id: id) else {
            throw JobAdministrationError(description: "no job with id \(id)", kind: .notFound)
        }
        return job
    }

    static func summaries(_ rows: [PostgresRow]) throws -> [JobSummary] {
        var jobs: [JobSummary] = []
        for row in rows {
            let (id, kind, sub, team, eventType, state, attempt, maxAttempts, runAt, createdAt, attemptedAt, finalizedAt, lockedBy,
                 lockedUntil, errors, steps) =
                try row.decode((Int64, String, String?, String?, String?, String, Int32, Int32, Date, Date, Date?, Date?, String?, Date?, String, String).self)
            jobs.append(JobSummary(id: id, kind: kind, appleSub: sub, appleTeam: team, eventType: eventType, state: JobState(rawValue: state) ?? .available,
                                   attempt: Int(attempt), maxAttempts: Int(maxAttempts), runAt: runAt, createdAt: createdAt,
                                   attemptedAt: attemptedAt, finalizedAt: finalizedAt, lockedBy: lockedBy, lockedUntil: lockedUntil,
                                   errors: errors, stepsDone: steps))
        }
        return jobs
    }
}
