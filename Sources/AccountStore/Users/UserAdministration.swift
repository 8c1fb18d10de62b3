import Foundation
import Logging
import PostgresNIO

/// A user as `siwa users show` prints it (sql/025's `siwa.user_directory`):
/// no email address, name, org id or token, only whether siwa holds them.
public struct UserSummary: Sendable, Equatable, Codable {
    public let userID: Int64
    public let appleSub: String
    public let appleTeam: String
    public let clientID: String?
    public let status: String
    public let createdAt: Date
    public let updatedAt: Date
    public let lastSignInAt: Date?
    public let purgedAt: Date?
    public let hasEmail: Bool
    public let transferState: String?
    public let tokens: Int
    public let tokensValidatedAt: Date?

    enum CodingKeys: String, CodingKey {
        case status, tokens
        case userID = "user_id", appleSub = "apple_sub", appleTeam = "apple_team", clientID = "client_id"
        case createdAt = "created_at", updatedAt = "updated_at", lastSignInAt = "last_sign_in_at", purgedAt = "purged_at"
        case hasEmail = "has_email", transferState = "transfer_state", tokensValidatedAt = "tokens_validated_at"
    }
}

/// One user found by email address on the admin page.
public struct UserFound: Sendable, Equatable, Codable {
    public let appleSub: String
    public let appleTeam: String
    public let userID: Int64

    enum CodingKeys: String, CodingKey {
        case appleSub = "apple_sub", appleTeam = "apple_team", userID = "user_id"
    }
}

/// The decoding of sql/025's deletion functions' one row.
enum UserDeletion {
    static func decode(_ rows: [PostgresRow]) throws -> DeletionScheduled? {
        guard let row = rows.first else { return nil }
        let (found, id, state, willRevoke, alreadyPurged) = try row.decode((Bool, Int64?, String?, Bool, Bool).self)
        guard found, let id, let state else { return nil }
        return DeletionScheduled(jobID: id, state: state, willRevoke: willRevoke, alreadyPurged: alreadyPurged)
    }
}

/// What an admin does to one user: `siwa users show|delete`, the team a
/// sub named on the command line is in, and the admin page's lookup by
/// email address. Reads `siwa.user_directory`; every change is a checked,
/// audited function of sql/025.
public struct UserAdministration: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The teams in which `appleSub` is a user (most often one).
    public func teams(ofSub appleSub: String) async throws -> [String] {
        try await client.guardedQuery("""
            SELECT apple_team FROM siwa.user_directory WHERE apple_sub = \(appleSub) ORDER BY apple_team
            """, logger: logger).map { try $0.decode(String.self) }
    }

    public func show(appleSub: String, team: String) async throws -> UserSummary? {
        let rows = try await client.guardedQuery("""
            SELECT user_id, apple_sub, apple_team, client_id, status, created_at, updated_at, last_sign_in_at, purged_at,
                   has_email, transfer_state, tokens, tokens_validated_at
            FROM siwa.user_directory WHERE apple_sub = \(appleSub) AND apple_team = \(team)
            """, logger: logger)
        guard let row = rows.first else { return nil }
        let columns = try row.decode((Int64, String, String, String?, String, Date, Date, Date?, Date?, Bool, String?, Int64, Date?).self)
        return UserSummary(userID: columns.0, appleSub: columns.1, appleTeam: columns.2, clientID: columns.3, status: columns.4,
                           createdAt: columns.5, updatedAt: columns.6, lastSignInAt: columns.7, purgedAt: columns.8,
                           hasEmail: columns.9, transferState: columns.10, tokens: Int(columns.11), tokensValidatedAt: columns.12)
    }

    /// `siwa users delete`: the deletion DELETE /v1/users/{sub} makes, as
    /// the caller's own role (a member of siwa_admin), audited with it.
    /// nil: no such user.
    public func delete(appleSub: String, team: String, loginHint: String?) async throws -> DeletionScheduled? {
        let rows = try await client.guardedQuery("""
            SELECT user_found, job_id, job_state, will_revoke, already_purged
            FROM siwa.delete_user(\(appleSub), \(team), \(loginHint))
            """, logger: logger)
        return try UserDeletion.decode(rows)
    }

    /// The active users with exactly this email address (case aside), for
    /// the live admin key `keyID`; audited `user.looked_up` without the address.
    public func find(email: String, adminKeyID: Int64) async throws -> [UserFound] {
        try await client.guardedQuery("""
            SELECT found_sub, found_team, found_user_id FROM siwa.find_user_by_email_by_key(\(email), \(adminKeyID))
            """, logger: logger).map { row in
            let (sub, team, id) = try row.decode((String, String, Int64).self)
            return UserFound(appleSub: sub, appleTeam: team, userID: id)
        }
    }
}
