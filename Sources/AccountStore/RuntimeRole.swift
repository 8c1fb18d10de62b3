import Logging
import PostgresNIO

/// The runtime role's privileges (sql/004_runtime_role.sql): `siwa migrate`
/// grants them, `serve` and `worker` check at start-up that they do not run
/// with more.
public enum RuntimeRole {
    /// Grants the runtime privileges to `role` (idempotent). Runs as the
    /// owner, after the migrations.
    public static func grant(to role: String, client: PostgresClient, logger: Logger) async throws {
        try await client.guardedQuery("SELECT siwa.grant_runtime_privileges(\(role)::name)", logger: logger)
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
    public static func warnIfPrivileged(client: PostgresClient, logger: Logger) async throws {
        let problems = try await excessPrivileges(client: client, logger: logger)
        guard !problems.isEmpty else { return }
        logger.warning("The database role siwa runs as can alter the audit trail; run siwa serve and siwa worker as a runtime role (see siwa migrate --help)",
                       metadata: ["role_problems": "\(problems.joined(separator: "; "))"])
    }
}
