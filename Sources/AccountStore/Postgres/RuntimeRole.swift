import Logging
import PostgresNIO

/// The process a runtime role is for: each is granted the rows of
/// `siwa.runtime_grants` marked for it (sql/018_runtime_roles.sql).
public enum RuntimeProcess: String, Sendable, CaseIterable {
    case serve, worker
}

/// The runtime roles' privileges (sql/004_runtime_role.sql, 007, 018):
/// `siwa migrate` grants them, `serve` and `worker` check at start-up that
/// they do not run with more.
public enum RuntimeRole {
    /// Grants `role` the runtime privileges of `processes` (both: one role
    /// for serve and worker, a trial), and takes away any other it held on
    /// siwa's objects (idempotent). Runs as the owner, after the migrations.
    public static func grant(to role: String, for processes: [RuntimeProcess] = RuntimeProcess.allCases,
                             client: PostgresClient, logger: Logger) async throws {
        let names = processes.map(\.rawValue)
        try await client.guardedQuery("SELECT siwa.grant_runtime_privileges(\(role)::name, \(names)::text[])", logger: logger)
    }

    /// The roles among `names` that exist in the cluster.
    public static func existing(_ names: [String], client: PostgresClient, logger: Logger) async throws -> Set<String> {
        let rows = try await client.guardedQuery("SELECT rolname::text FROM pg_roles WHERE rolname = ANY(\(names)::text[])", logger: logger)
        return Set(try rows.map { try $0.decode(String.self) })
    }

    /// What is wrong with running as `role` (or as the connection's own
    /// user when nil): a superuser, the owner of siwa's tables, or a member
    /// of that owner can alter or truncate the audit trail. Empty: fine.
    public static func excessPrivileges(of role: String? = nil, client: PostgresClient, logger: Logger) async throws -> [String] {
        let rows = try await client.guardedQuery("""
            SELECT r.rolsuper,
                   pg_has_role(r.oid, t.relowner, 'USAGE'),
                   r.rolname = pg_get_userbyid(t.relowner),
                   pg_get_userbyid(t.relowner)
            FROM pg_roles r, pg_class t
            WHERE r.rolname = coalesce(\(role), current_user) AND t.oid = 'siwa.audit_log'::regclass
            """, logger: logger)
        for row in rows {
            let (superuser, member, isOwner, owner) = try row.decode((Bool, Bool, Bool, String).self)
            var problems: [String] = []
            if superuser { problems.append("is a superuser") }
            if isOwner {
                problems.append("owns siwa's tables")
            } else if member {
                problems.append("is a member of \(owner), the owner of siwa's tables")
            }
            return problems
        }
        return []
    }

    /// serve and worker at start-up: a warning when they run with more
    /// privileges than they need (a one-role trial does; production should not).
    public static func warnIfPrivileged(as process: RuntimeProcess, client: PostgresClient, logger: Logger) async throws {
        let problems = try await excessPrivileges(client: client, logger: logger)
        if !problems.isEmpty {
            logger.warning("The database role siwa runs as can alter the audit trail; run siwa serve and siwa worker as runtime roles (see siwa migrate --help)",
                           metadata: ["role_problems": "\(problems.joined(separator: "; "))"])
        }
        if try await holdsOtherProcessPrivileges(process, client: client, logger: logger) {
            logger.warning("siwa serve and siwa worker run with a shared database role, which may do both processes' work; create siwa_serve and siwa_worker and give each unit its own SIWA_DATABASE_URL (see siwa migrate --help)",
                           metadata: ["process": "\(process.rawValue)"])
        }
    }

    /// Whether the connection's role holds a privilege that only the other
    /// process's role should: for serve, writing the audit chain or a job's
    /// steps_done (the worker's); for the worker, recording notifications
    /// (serve's). True for a role shared by both (a one-role trial).
    public static func holdsOtherProcessPrivileges(_ process: RuntimeProcess, client: PostgresClient, logger: Logger) async throws -> Bool {
        let query: PostgresQuery = switch process {
        case .serve:
            "SELECT has_table_privilege('siwa.audit_chain', 'INSERT') OR has_column_privilege('siwa.jobs', 'steps_done', 'UPDATE')"
        case .worker:
            "SELECT has_table_privilege('siwa.notifications', 'INSERT')"
        }
        let rows = try await client.guardedQuery(query, logger: logger)
        return try rows.first?.decode(Bool.self) ?? false
    }
}
