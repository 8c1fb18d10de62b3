import Foundation
import Logging
import PostgresNIO

/// `siwa webhooks replay`: enqueue again the app's deliveries of the events
/// recorded since a time (for an app that was down longer than the
/// attempts), read back from the audit trail with the mapping that enqueued
/// them first (siwa.app_events_of, sql/014), so each keeps its webhook-id
/// and the app can tell what it has seen. An event whose delivery is still
/// pending is not enqueued twice. One statement, with its audit row: the
/// function `siwa.replay_app_events` (sql/017), since an admin's role may
/// not write the queue or the trail itself.
public struct AppEventReplay: Sendable {
    public struct Outcome: Sendable, Equatable {
        public let enqueued: Int
        /// Events whose delivery was pending already.
        public let alreadyPending: Int
        /// More events than the limit: run again from this time (ISO 8601).
        public let continueFrom: String?
    }

    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Throws `AppEventReplayRefused` while the webhook is off (no worker
    /// has SIWA_APP_WEBHOOK_URL: nothing would deliver them).
    public func replay(since: Date, sub: String?, limit: Int, loginHint: String?) async throws -> Outcome {
        let rows = try await client.guardedQuery("""
            SELECT * FROM siwa.replay_app_events(\(since)::timestamptz, \(sub)::text, \(Int32(clamping: limit)), \(loginHint)::text)
            """, logger: logger)
        guard let row = rows.first else { throw AppEventReplayRefused(description: "the replay answered nothing") }
        let (enabled, enqueued, pending, last, found, _) = try row.decode((Bool?, Int64, Int64, String?, Int64, Int64).self)
        guard enabled == true else {
            throw AppEventReplayRefused(description: "the app webhook is off: no worker has started with SIWA_APP_WEBHOOK_URL, so nothing would deliver the events (siwa.app_webhook)")
        }
        return Outcome(enqueued: Int(enqueued), alreadyPending: Int(pending), continueFrom: found > limit ? last : nil)
    }
}

/// The replay cannot run (the webhook is off).
public struct AppEventReplayRefused: Error, Sendable, CustomStringConvertible {
    public let description: String
}
