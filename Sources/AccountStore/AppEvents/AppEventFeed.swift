import Foundation
import Logging
import PostgresNIO

/// `GET /v1/events`: the app events in order, each with the id and the
/// parts of the body its webhook delivery has, so a backend that was down
/// past the deliveries' attempts catches up by itself. One call of
/// `siwa.app_events_feed` (sql/027) per page: the same mapping
/// (siwa.app_events_of) and body (siwa.app_event_payload) as the worker's
/// claim, an index range scan from the cursor, read as its owner (serve's
/// role reads no audit row itself).
public struct AppEventFeed: Sendable {
    /// Where a page starts: after the event of this id (`evt_<seq>_<n>`).
    public struct Cursor: Sendable, Equatable {
        public let seq: Int64
        public let position: Int32

        /// nil for anything that is not an event id siwa writes.
        public init?(eventID: String) {
            let parts = eventID.split(separator: "_", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0] == "evt", parts[1].utf8.count <= 19, parts[2].utf8.count <= 2,
                  parts[1].utf8.allSatisfy({ (0x30...0x39).contains($0) }), parts[2].utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                  let seq = Int64(parts[1]), let position = Int32(parts[2]), seq > 0, position > 0 else { return nil }
            self.seq = seq
            self.position = position
        }
    }

    /// One event as its webhook carries it: the webhook-id, the envelope's
    /// `type`, `timestamp` and `data` (JSON, as the database wrote it).
    public struct Event: Sendable, Equatable {
        public let id: String
        public let type: String
        public let timestamp: String
        public let data: String
    }

    public enum Page: Sendable, Equatable {
        /// At most the limit's events; `hasMore`: more wait after them.
        case events([Event], hasMore: Bool)
        /// The cursor names no event siwa recorded.
        case unknownCursor
        /// The first event after the cursor is older than the retention:
        /// the feed cannot answer from there without skipping it.
        case expiredCursor
    }

    let client: PostgresClient
    /// How long an event stays in the feed (SIWA_EVENTS_FEED_RETENTION_DAYS).
    public let retentionDays: Double
    let logger: Logger

    public init(client: PostgresClient, retentionDays: Double, logger: Logger) {
        self.client = client
        self.retentionDays = retentionDays
        self.logger = logger
    }

    /// The events of `team` after `cursor` (nil: from the oldest one inside
    /// the retention), at most `limit`. `withTeamless`: also the events of
    /// rows written before teams (sql/024), which name none; true only for
    /// a siwa serving one team, whose they are.
    public func page(team: String, withTeamless: Bool, after cursor: Cursor?, limit: Int) async throws -> Page {
        let rows = try await client.guardedQuery("""
            SELECT cursor_state, event_id, event_type, occurred_at, data
            FROM siwa.app_events_feed(\(team), \(withTeamless), \(cursor?.seq)::bigint, \(cursor?.position)::integer,
                                      \(Int32(clamping: limit)), make_interval(secs => \(retentionDays * 86_400)))
            """, leaseWithin: .requestLease, logger: logger)
        var events: [Event] = []
        for row in rows {
            let (state, id, type, timestamp, data) = try row.decode((String, String?, String?, String?, String?).self)
            switch state {
            case "unknown": return .unknownCursor
            case "expired": return .expiredCursor
            default:
                guard let id, let type, let timestamp, let data else { continue }
                events.append(Event(id: id, type: type, timestamp: timestamp, data: data))
            }
        }
        let hasMore = events.count > limit
        return .events(Array(events.prefix(limit)), hasMore: hasMore)
    }
}
