import Foundation
import Logging
import PostgresNIO

/// The worker's side of the app's deliveries (`app_event` jobs, sql/014):
/// the switch that says whether events are enqueued, the claim with its
/// per-user order, and the completion. Failures, lease renewal, rescue and
/// release are the queue's, for every kind (JobQueue).
public struct AppEventQueue: Sendable {
    public static let kind = AppEventParameters.kind

    let client: PostgresClient
    /// Names this worker in its leases (`locked_by`).
    public let worker: String
    let logger: Logger

    public init(client: PostgresClient, worker: String, logger: Logger) {
        self.client = client
        self.worker = worker
        self.logger = logger
    }

    /// Turns the enqueueing of deliveries on or off for every process
    /// (siwa.app_webhook), and says whether they carry email addresses, so
    /// that the events feed (sql/027) answers the bodies the worker sends.
    /// Returns whether it was on before.
    @discardableResult
    public func setEnabled(_ enabled: Bool, includeEmail: Bool = false) async throws -> Bool {
        let rows = try await client.guardedQuery("""
            WITH before AS (SELECT enabled FROM siwa.app_webhook)
            UPDATE siwa.app_webhook SET enabled = \(enabled), include_email = \(enabled && includeEmail),
                                        updated_at = clock_timestamp(), updated_by = \(worker)
            RETURNING (SELECT enabled FROM before)
            """, logger: logger)
        return try rows.first?.decode(Bool.self) ?? false
    }

    public func claim(limit: Int, leaseSeconds: Double, includeEmail: Bool) async throws -> [ClaimedAppEvent] {
        guard limit > 0 else { return [] }
        return try await client.guardedExecute(
            ClaimAppEventsStatement(worker: worker, limit: limit, leaseSeconds: leaseSeconds, includeEmail: includeEmail),
            logger: logger)
    }

    /// False if the lease was lost (another worker may deliver it again:
    /// at-least-once, the same webhook-id).
    public func complete(_ job: ClaimedJob) async throws -> Bool {
        let completed = try await client.guardedExecute(CompleteAppEventStatement(jobID: job.id, lease: job.lease), logger: logger)
        return !completed.isEmpty
    }
}
