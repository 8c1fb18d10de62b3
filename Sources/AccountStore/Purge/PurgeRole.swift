import Logging
import PostgresNIO

/// The role the purge plan's SQL steps on siwa's database run as
/// (SIWA_PURGE_ROLE, `SET LOCAL ROLE` for each step's transaction): the
/// grants on the app's tables are that role's, so serve never holds them,
/// and the worker's role, NOINHERIT, uses them only inside a step.
public enum PurgeRole {
    /// Why the connection's role cannot run plan steps as `role`, or nil.
    /// `inherits`: the connection's role holds `role`'s grants outside the
    /// steps too (it was not made NOINHERIT): worth a warning, not a refusal.
    public static func check(_ role: String, client: PostgresClient, logger: Logger) async throws
        -> (problem: String?, inherits: Bool) {
        let rows = try await client.guardedQuery("""
            SELECT current_user::text, r.oid IS NOT NULL,
                   r.oid IS NOT NULL AND pg_has_role(current_user, r.oid, 'MEMBER'),
                   r.oid IS NOT NULL AND pg_has_role(current_user, r.oid, 'USAGE')
            FROM (SELECT) AS one LEFT JOIN pg_roles AS r ON r.rolname = \(role)
            """, logger: logger)
        guard let row = rows.first else { return ("no answer from the database", false) }
        let (user, exists, member, inherits) = try row.decode((String, Bool, Bool, Bool).self)
        if !exists {
            return ("the role \(role) does not exist: the purge plan's SQL steps on siwa's database run as it. "
                    + "Create it (CREATE ROLE \(role) NOLOGIN; GRANT \(role) TO \(user);), grant it what the plan does "
                    + "on the app's tables, or set SIWA_PURGE_ROLE (deploy/README.md, \"The database\")", false)
        }
        if !member {
            return ("\(user) may not act as \(role), which the purge plan's SQL steps on siwa's database run as: GRANT \(role) TO \(user);", false)
        }
        return (nil, inherits && user != role)
    }

    /// The step transaction's switch to `role` (SET LOCAL ROLE, with the
    /// name bound rather than spliced into the statement).
    public static func become(_ role: String) -> PostgresQuery {
        "SELECT set_config('role', \(role), true)"
    }

    /// Back to the connection's own role, for the step's record.
    public static let leave: PostgresQuery = "SELECT set_config('role', 'none', true)"
}
