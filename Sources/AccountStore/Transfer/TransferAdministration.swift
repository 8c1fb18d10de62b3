import Foundation
import Logging
import PostgresNIO

/// How many users a start of `siwa transfer prepare` or `complete` left
/// pending and found done, and the jobs it enqueued.
public struct TransferStart: Sendable, Equatable {
    public let pending: Int
    public let done: Int
    public let enqueued: Int
}

/// One line of `siwa transfer status`: users of a team, phase and state,
/// with Apple's last answer (or siwa's reason) when there is one.
public struct TransferStatusLine: Sendable, Equatable, Encodable {
    public let team: String?
    public let phase: String
    public let state: String
    public let reason: String?
    public let users: Int
}

/// One exported user: siwa's id and the transfer_sub toward the receiving
/// team. Nothing else leaves (Apple: "include only the transfer identifier
/// to identify the user").
public struct ExportedTransferUser: Sendable, Equatable, Codable {
    public let userID: Int64
    public let transferSub: String

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case transferSub = "transfer_sub"
    }

    public init(userID: Int64, transferSub: String) {
        self.userID = userID
        self.transferSub = transferSub
    }
}

/// A transfer step an admin asked for was refused: one line saying why
/// (the function's own words), nothing written.
public struct TransferRefused: Error, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }
}

/// `siwa transfer`'s side of the database: each call is one SECURITY
/// DEFINER function of sql/023 (an admin's role, a member of siwa_admin,
/// reads no user and writes nothing itself), which checks the request,
/// makes the change and writes its audit row naming the caller.
public struct TransferAdministration: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The sending team's start: a `transfer_prepare` job for each user not
    /// prepared for `target` yet.
    public func prepare(target: String, sourceTeam: String, clientID: String, loginHint: String?) async throws -> TransferStart {
        try await start("""
            SELECT users_pending, users_done, jobs_enqueued
            FROM siwa.start_transfer_prepare(\(target), \(sourceTeam), \(clientID), \(loginHint)::text)
            """)
    }

    /// The receiving team's start: a `transfer_complete` job for each user
    /// awaiting completion toward `team`.
    public func complete(team: String, clientID: String, loginHint: String?) async throws -> TransferStart {
        try await start("""
            SELECT users_pending, users_done, jobs_enqueued FROM siwa.start_transfer_complete(\(team), \(clientID), \(loginHint)::text)
            """)
    }

    public func status() async throws -> [TransferStatusLine] {
        let rows = try await refusing { try await client.guardedQuery("SELECT * FROM siwa.transfer_status()", logger: logger) }
        return try rows.map { row in
            let (team, phase, state, reason, users) = try row.decode((String?, String, String, String?, Int64).self)
            return TransferStatusLine(team: team, phase: phase, state: state, reason: reason, users: Int(users))
        }
    }

    public func export(target: String, skipFailed: Bool, loginHint: String?) async throws -> [ExportedTransferUser] {
        let rows = try await refusing {
            try await client.guardedQuery("""
                SELECT user_id, transfer_sub FROM siwa.export_transfer(\(target), \(skipFailed), \(loginHint)::text)
                """, logger: logger)
        }
        return try rows.map { row in
            let (id, transferSub) = try row.decode((Int64, String).self)
            return ExportedTransferUser(userID: id, transferSub: transferSub)
        }
    }

    /// Creates the users of another siwa's export as awaiting completion
    /// toward `team`. Returns how many.
    public func importUsers(_ users: [ExportedTransferUser], team: String, loginHint: String?) async throws -> Int {
        let rows = try await refusing {
            try await client.guardedQuery("""
                SELECT imported FROM siwa.import_transfer(\(team), \(users.map(\.userID)), \(users.map(\.transferSub)), \(loginHint)::text)
                """, logger: logger)
        }
        return Int(try rows.first?.decode(Int64.self) ?? 0)
    }

    private func start(_ query: PostgresQuery) async throws -> TransferStart {
        let rows = try await refusing { try await client.guardedQuery(query, logger: logger) }
        guard let row = rows.first else { throw TransferRefused("the database answered nothing") }
        let (pending, done, enqueued) = try row.decode((Int64, Int64, Int64).self)
        return TransferStart(pending: Int(pending), done: Int(done), enqueued: Int(enqueued))
    }

    /// The functions' refusals (bad input, a wrong state, a clash) as
    /// `TransferRefused`; anything else as it came.
    private func refusing<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PSQLError {
            switch error.serverInfo?[.sqlState] {
            case "22023", "55000", "23505": throw TransferRefused(error.serverInfo?[.message] ?? "refused")
            default: throw error
            }
        }
    }
}
