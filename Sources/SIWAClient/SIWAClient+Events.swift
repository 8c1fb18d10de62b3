import Foundation
import OpenAPIRuntime

extension SIWAClient {
    /// `GET /v1/events`: the app events after `after` (an event's id, a
    /// webhook-id or a page's `next`; nil: from the oldest the feed keeps),
    /// oldest first, at most `limit` (siwa's default, 100, when nil; up to
    /// 1000). Each event is the one its webhook delivers, id and body.
    /// Throws `SIWARefusal` 410 `cursor_expired` when the event after
    /// `after` is older than the feed's retention, 400 for a bad cursor.
    public func events(after: String? = nil, limit: Int? = nil, in team: Team? = nil) async throws -> AppEventPage {
        try await call {
            switch try await $0.listEvents(query: Self.eventsQuery(after: after, limit: limit, team: team)) {
            case .ok(let ok):
                let page = try ok.body.json
                // Each envelope as it came (the data kept whole), read by
                // the webhook's decoder, so both paths give the same AppEvent.
                let encoder = JSONEncoder()
                let events = try page.events.map { try AppEvent(id: $0.id, body: try encoder.encode($0.event)) }
                return AppEventPage(events: events, hasMore: page.hasMore, next: page.next)
            case let other: throw Self.unexpected(other)
            }
        }
    }

    /// Reads the feed from `after` until caught up, handing each event to
    /// `handle` in order, and returns the cursor to keep (the last event
    /// handled, else `after`). `handle` should skip an id it has processed
    /// (`SeenAppEventIDs`): a webhook may bring the same event too. If it
    /// throws, so does this, and the events after the one it refused are
    /// not read: ask again from the last one it took.
    public func catchUp(after: String?, limit: Int? = nil, in team: Team? = nil,
                        handle: (AppEvent) async throws -> Void) async throws -> String? {
        var cursor = after
        while true {
            let page = try await events(after: cursor, limit: limit, in: team)
            for event in page.events {
                try await handle(event)
                cursor = event.id
            }
            cursor = page.next ?? cursor
            if !page.hasMore || page.events.isEmpty { return cursor }
        }
    }

    static func eventsQuery(after: String?, limit: Int?, team: Team?) -> Operations.ListEvents.Input.Query {
        switch team {
        case .team(let team): .init(after: after, limit: limit, team: team)
        case .clientID(let clientID): .init(after: after, limit: limit, clientId: clientID)
        case nil: .init(after: after, limit: limit)
        }
    }
}
