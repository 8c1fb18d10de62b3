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

/// What an admin asked of a job, refused with a reason an operator can act on.
public struct JobAdministrationError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// `siwa jobs`: read the queue, and retry or cancel a job, each change
/// written to the audit trail with the acting admin's name.
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

    public func list(state: JobState?, limit: Int) async throws -> [JobSummary] {
        let rows = try await client.query("""
            SELECT \(unescaped: Self.columns) FROM siwa.jobs
            WHERE \(state?.rawValue)::text IS NULL OR state = \(state?.rawValue)::text
            ORDER BY id DESC LIMIT \(limit)
            """, logger: logger)
        return try await Self.summaries(rows)
    }

    public func show(id: Int64) async throws -> JobSummary? {
        let rows = try await client.query("SELECT \(unescaped: Self.columns) FROM siwa.jobs WHERE id = \(id)", logger: logger)
        return try await Self.summaries(rows).first
    }

    /// Makes a job run again now: from `discarded`, `cancelled`, `retryable`
    /// or `available`. A job that used up its attempts gets one more (as
    /// River does); its error history stays.
    public func retry(id: Int64, actor: String) async throws -> JobSummary {
        try await change(id: id, actor: actor, action: "job.retry", allowedFrom: [.discarded, .cancelled, .retryable, .available], update: """
            state = 'available', run_at = now(), finalized_at = NULL,
            max_attempts = greatest(max_attempts, attempt + 1)
            """)
    }

    /// Stops a job that has not started: from `available` or `retryable`.
    public func cancel(id: Int64, actor: String) async throws -> JobSummary {
        try await change(id: id, actor: actor, action: "job.cancel", allowedFrom: [.available, .retryable], update: """
            state = 'cancelled', finalized_at = now()
            """)
    }

    private func change(id: Int64, actor: String, action: String, allowedFrom: [JobState], update: String) async throws -> JobSummary {
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
                    SELECT 'admin', \(action), apple_sub, jsonb_build_object('job_id', id, 'admin', \(actor)::text, 'new_state', state)
                    FROM job
                    RETURNING seq
                    """, logger: logger)
                var changed = false
                for try await _ in rows.decode(Int64.self) { changed = true }
                return changed
            }
            guard let job = try await show(id: id) else {
                throw JobAdministrationError(description: "no job with id \(id)")
            }
            guard changed else {
                throw JobAdministrationError(description: "job \(id) is \(job.state.rawValue); only a job that is \(allowed.joined(separator: ", ")) can be changed this way")
            }
            return job
        } catch let error as PSQLError {
            if error.serverInfo?[.sqlState] == "23505" {
                throw JobAdministrationError(description: "another purge for the same Apple user is already pending; retry refused (see siwa jobs list)")
            }
            throw error
        }
    }

    static func summaries(_ rows: PostgresRowSequence) async throws -> [JobSummary] {
        var jobs: [JobSummary] = []
        for try await row in rows {
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
