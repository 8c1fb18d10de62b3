import Foundation
import Logging
import PostgresNIO

/// An API key as `siwa api-keys list` shows it: never the secret's hash.
public struct APIKeySummary: Sendable, Encodable, Equatable {
    public let id: Int64
    public let name: String
    public let prefix: String
    /// `app` (`/v1`) or `admin` (the admin listener).
    public let scope: APIKeyScope
    public let createdAt: Date
    /// The database role that made it (`session_user`).
    public let createdBy: String
    public let revokedAt: Date?
    public let revokedBy: String?
    public let lastUsedAt: Date?

    enum CodingKeys: String, CodingKey {
        case id, name, prefix, scope, createdAt, createdBy, revokedAt, revokedBy, lastUsedAt
    }

    /// Every field, null when unset (the synthesized encoding leaves unset
    /// ones out, and `--json` readers should not have to guess); times to
    /// the second, as `siwa api-keys list --json` has always shown them.
    public func encode(to encoder: any Encoder) throws {
        func time(_ date: Date?) -> String? { date.map { UTCTime.text($0, .seconds) } }
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(name, forKey: .name)
        try container.encode(prefix, forKey: .prefix)
        try container.encode(scope, forKey: .scope)
        try container.encode(time(createdAt), forKey: .createdAt)
        try container.encode(createdBy, forKey: .createdBy)
        try container.encode(time(revokedAt), forKey: .revokedAt)
        try container.encode(revokedBy, forKey: .revokedBy)
        try container.encode(time(lastUsedAt), forKey: .lastUsedAt)
    }
}

/// What an admin asked of the API keys, refused with a reason to act on.
public struct APIKeyAdministrationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
}

/// `siwa api-keys`: make, list and revoke the keys the app's backend calls
/// siwa with (scope `app`) and the admins' keys (scope `admin`). Runs as an
/// admin's own role (a member of `siwa_admin`), which writes keys only
/// through `siwa.create_api_key` and `siwa.revoke_api_key` (sql/017): each
/// makes the change and its audit row in one statement, naming that role
/// (`session_user`) as `db_user` and the login name only as a hint. siwa
/// makes the key and passes the function only its prefix and the SHA-256
/// of its secret.
public struct APIKeyAdministration: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    static let columns = "id, name, prefix, scope, created_at, created_by, revoked_at, revoked_by, last_used_at"

    /// The name rule of the table's CHECK: a letter or digit, then up to 62
    /// letters, digits, '.', '_' or '-'.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        func isAlphanumeric(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
        guard let first = bytes.first, bytes.count <= 63, isAlphanumeric(first) else { return false }
        return bytes.dropFirst().allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    static let nameRule = "an API key name is 1 to 63 characters: a letter or digit, then letters, digits, '.', '_' or '-'"

    /// A new key named `name`: its text (shown once, never stored) and its row.
    public func create(name: String, scope: APIKeyScope = .app, loginHint: String?) async throws -> (key: String, row: APIKeySummary) {
        guard Self.isValidName(name) else { throw APIKeyAdministrationError(description: Self.nameRule) }
        // A prefix that is taken already (60 random bits: practically
        // never) gets another try with a new key.
        for _ in 0..<3 {
            let key = APIKeyFormat.generate()
            do {
                let rows = try await client.guardedQuery("""
                    SELECT \(unescaped: Self.columns)
                    FROM siwa.create_api_key(\(name), \(key.prefix), \(key.secretSHA256), \(scope.rawValue), \(loginHint)::text)
                    """, logger: logger)
                guard let row = try Self.summaries(rows).first else {
                    throw APIKeyAdministrationError(description: "the key was not stored")
                }
                return (key.text, row)
            } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
                if error.serverInfo?[.constraintName] == "api_keys_prefix_key" { continue }
                throw APIKeyAdministrationError(description: "a live API key named '\(name)' exists already; revoke it first or choose another name")
            }
        }
        throw APIKeyAdministrationError(description: "no free key prefix after 3 tries")
    }

    /// Every key, live and revoked, oldest first.
    public func list() async throws -> [APIKeySummary] {
        try Self.summaries(try await client.guardedQuery(
            "SELECT \(unescaped: Self.columns) FROM siwa.api_keys ORDER BY id", logger: logger))
    }

    /// Revokes the live key named `name`: it stops working at once, on
    /// every instance (each request checks the database).
    public func revoke(name: String, loginHint: String?) async throws -> APIKeySummary {
        guard Self.isValidName(name) else { throw APIKeyAdministrationError(description: Self.nameRule) }
        do {
            let rows = try await client.guardedQuery("""
                SELECT \(unescaped: Self.columns) FROM siwa.revoke_api_key(\(name), \(loginHint)::text)
                """, logger: logger)
            guard let row = try Self.summaries(rows).first else {
                throw APIKeyAdministrationError(description: "the key was not revoked")
            }
            return row
        } catch let error as PSQLError where ["P0002", "55000"].contains(error.serverInfo?[.sqlState]) {
            // No such key, or revoked already: the function's one line.
            throw APIKeyAdministrationError(description: error.serverInfo?[.message] ?? "refused")
        }
    }

    static func summaries(_ rows: [PostgresRow]) throws -> [APIKeySummary] {
        try rows.map { row in
            let (id, name, prefix, scope, createdAt, createdBy, revokedAt, revokedBy, lastUsedAt) =
                try row.decode((Int64, String, String, String, Date, String, Date?, String?, Date?).self)
            return APIKeySummary(id: id, name: name, prefix: prefix, scope: APIKeyScope(rawValue: scope) ?? .app,
                                 createdAt: createdAt, createdBy: createdBy,
                                 revokedAt: revokedAt, revokedBy: revokedBy, lastUsedAt: lastUsedAt)
        }
    }
}
