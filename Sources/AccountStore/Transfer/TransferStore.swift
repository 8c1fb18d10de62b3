import Foundation
import Logging
import PostgresNIO

/// A user's app transfer state, as the worker's transfer jobs read it
/// (sql/023: the transfer columns of siwa.users).
public struct TransferUser: Sendable, Equatable {
    public let userID: Int64
    /// nil for a user imported from another siwa, until it completes.
    public let appleSub: String?
    /// The team `appleSub` is in (nil with it).
    public let appleTeam: String?
    public let transferSub: String?
    public let team: String?
    public let phase: String?
    public let state: String?
    /// Deleted, or purged: the user does not move.
    public let gone: Bool
}

/// The worker's side of an app transfer (the `transfer_prepare` and
/// `transfer_complete` jobs): read a user's state, record Apple's answers,
/// and move a user (siwa.complete_user_transfer, sql/023, which audits the
/// move). Each write is guarded by the phase and team the job was made for,
/// so a job left from an earlier run changes nothing a later one set.
public struct TransferStore: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func user(_ id: Int64) async throws -> TransferUser? {
        let rows = try await client.guardedQuery("""
            SELECT id, apple_sub, apple_team, transfer_sub, transfer_team, transfer_phase, transfer_state,
                   purged_at IS NOT NULL OR status = 'deleted'
            FROM siwa.users WHERE id = \(id)
            """, logger: logger)
        guard let row = rows.first else { return nil }
        let (userID, sub, appleTeam, transferSub, team, phase, state, gone) =
            try row.decode((Int64, String?, String?, String?, String?, String?, String?, Bool).self)
        return TransferUser(userID: userID, appleSub: sub, appleTeam: appleTeam, transferSub: transferSub, team: team, phase: phase, state: state, gone: gone)
    }

    /// The sending team's answer: the user's transfer_sub toward `team`.
    /// False when the user is no longer pending in that phase (done, or
    /// prepared again for another team).
    @discardableResult
    public func recordTransferSub(userID: Int64, team: String, transferSub: String) async throws -> Bool {
        let rows = try await client.guardedQuery("""
            UPDATE siwa.users SET transfer_sub = \(transferSub), transfer_state = 'done', transfer_reason = NULL,
                transfer_attempts = transfer_attempts + 1, transfer_updated_at = now()
            WHERE id = \(userID) AND transfer_team = \(team) AND transfer_phase = 'prepare' AND transfer_state <> 'done'
            RETURNING id
            """, logger: logger)
        return !rows.isEmpty
    }

    /// An answer that was not a success: kept as the user's reason (what
    /// `siwa transfer status` shows); `isFinal` marks the user failed, else
    /// the job retries and the user stays pending.
    public func recordRefusal(userID: Int64, phase: String, team: String, reason: String, isFinal: Bool) async throws {
        _ = try await client.guardedQuery("""
            UPDATE siwa.users SET transfer_state = CASE WHEN \(isFinal) THEN 'failed' ELSE transfer_state END,
                transfer_reason = left(\(reason), 300), transfer_attempts = transfer_attempts + 1, transfer_updated_at = now()
            WHERE id = \(userID) AND transfer_team = \(team) AND transfer_phase = \(phase) AND transfer_state <> 'done'
            """, logger: logger)
    }

    /// Moves the user to the sub Apple answered (sql/023's outcome: moved,
    /// already_done, not_awaiting, deleted, sub_taken).
    public func complete(userID: Int64, transferSub: String, team: String, newSub: String, email: String?,
                         isPrivateEmail: Bool?) async throws -> String {
        let rows = try await client.guardedQuery("""
            SELECT siwa.complete_user_transfer(\(userID), \(transferSub), \(team), \(newSub), \(email)::text, \(isPrivateEmail)::boolean)
            """, logger: logger)
        return try rows.first?.decode(String.self) ?? "not_awaiting"
    }
}
