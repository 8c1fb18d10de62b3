import Foundation

/// The yardstick anyone can rebuild: the plainest correct SQL for a
/// notification and for a job, on four tables with only the keys they
/// need, run by pgbench against the same server in the same run. siwa's
/// figures are read against it: what siwa's own schema, statement and
/// process cost beyond what the work itself needs.
///
/// Per notification, one transaction of five statements: the notification
/// (once per `jti`), the user (once per `sub`), the user's status, the
/// purge job (one pending per user), one audit row. Per job: claim one
/// with FOR UPDATE SKIP LOCKED in one transaction, complete it in the next.
enum PlainVersion {
    static let notificationClients = 16
    static let workerClients = 8

    static let schema = """
        CREATE SCHEMA IF NOT EXISTS plain;
        CREATE TABLE IF NOT EXISTS plain.users (
            id bigserial PRIMARY KEY, apple_sub text NOT NULL UNIQUE, status text NOT NULL DEFAULT 'active',
            updated_at timestamptz NOT NULL DEFAULT now());
        CREATE TABLE IF NOT EXISTS plain.notifications (
            id bigserial PRIMARY KEY, jti text NOT NULL UNIQUE, event_type text NOT NULL, apple_sub text NOT NULL,
            event_time bigint NOT NULL, claims jsonb NOT NULL, received_at timestamptz NOT NULL DEFAULT now());
        CREATE TABLE IF NOT EXISTS plain.jobs (
            id bigserial PRIMARY KEY, kind text NOT NULL, apple_sub text NOT NULL, state text NOT NULL DEFAULT 'available',
            run_at timestamptz NOT NULL DEFAULT now());
        CREATE UNIQUE INDEX IF NOT EXISTS jobs_one_pending_purge ON plain.jobs (apple_sub)
            WHERE kind = 'purge' AND state IN ('available', 'running');
        CREATE INDEX IF NOT EXISTS jobs_runnable ON plain.jobs (kind, run_at, id) WHERE state = 'available';
        CREATE TABLE IF NOT EXISTS plain.audit_log (
            seq bigserial PRIMARY KEY, action text NOT NULL, apple_sub text, details jsonb NOT NULL,
            occurred_at timestamptz NOT NULL DEFAULT now());
        """

    /// The notification transaction, with the subs siwa's notifications use.
    static let notificationScript = """
        \\set n random(1, 2000000000)
        \\set s random(0, \(IngestBench.subRange - 1))
        \\set ms random(1600000000000, 1800000000000)
        BEGIN;
        INSERT INTO plain.notifications (jti, event_type, apple_sub, event_time, claims) VALUES ('plain-' || :client_id || '-' || :n, 'email-enabled', 'bench-sub-' || :s, :ms, '{"iss":"https://appleid.apple.com","aud":"com.example.siwa.bench","events":{"type":"email-enabled"}}') ON CONFLICT (jti) DO NOTHING;
        INSERT INTO plain.users (apple_sub) VALUES ('bench-sub-' || :s) ON CONFLICT DO NOTHING;
        UPDATE plain.users SET status = 'active', updated_at = now() WHERE apple_sub = 'bench-sub-' || :s;
        INSERT INTO plain.jobs (kind, apple_sub) VALUES ('purge', 'bench-sub-' || :s) ON CONFLICT DO NOTHING;
        INSERT INTO plain.audit_log (action, apple_sub, details) VALUES ('notification.recorded', 'bench-sub-' || :s, '{"event_type":"email-enabled"}');
        END;

        """

    /// One job: claimed in one transaction, completed in the next.
    static let jobScript = """
        UPDATE plain.jobs SET state = 'running' WHERE id = (SELECT id FROM plain.jobs WHERE kind = 'work' AND state = 'available' ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id AS job \\gset
        UPDATE plain.jobs SET state = 'completed' WHERE id = :job;

        """

    /// The notification yardstick on `database`: rate and PostgreSQL's cost
    /// per notification, over as many notifications as siwa's round had
    /// (the same number of pages first touched since a checkpoint, so
    /// full-page images weigh alike on both sides).
    static func notifications(on database: BenchDatabase, count: Int) async throws -> Figures {
        _ = try await database.scalar(schema)
        return try await measure(notificationScript, on: database, clients: notificationClients,
                                 length: .transactionsPerClient(max(1, count / notificationClients)))
    }

    /// The users a large database starts with, as siwa's preload makes them.
    static func preload(users: Int, on database: BenchDatabase) async throws {
        _ = try await database.scalar(schema)
        _ = try await database.scalar("""
            INSERT INTO plain.users (apple_sub) SELECT 'bench-sub-' || g FROM generate_series(0, \(users - 1)) AS g
            """)
    }

    /// The job yardstick: `jobs` waiting (more than `seconds` can burn), then claim-and-complete.
    static func jobs(on database: BenchDatabase, jobs: Int, seconds: Int) async throws -> Figures {
        _ = try await database.scalar(schema)
        _ = try await database.scalar("""
            INSERT INTO plain.jobs (kind, apple_sub) SELECT 'work', 'job-' || g FROM generate_series(1, \(jobs)) AS g
            """)
        return try await measure(jobScript, on: database, clients: workerClients, length: .seconds(seconds))
    }

    struct Figures {
        let rate: Double
        let cost: PostgresCost
    }

    private static func measure(_ script: String, on database: BenchDatabase, clients: Int, length: Pgbench.Length) async throws
        -> Figures {
        let before = try await PostgresCost.read(database)
        let run = try await Pgbench.runCounting(script: script, databaseURL: database.ownerURL, clients: clients, length: length)
        let after = try await PostgresCost.read(database)
        return Figures(rate: run.tps, cost: before.cost(to: after, per: run.transactions))
    }
}
