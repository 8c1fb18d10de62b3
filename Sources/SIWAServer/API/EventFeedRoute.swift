import AccountLifecycle
import AccountStore
import AppleSignIn
import Foundation
import Hummingbird
import Logging

/// `GET /v1/events?after=ID&limit=N`: the app events in order, for a
/// backend that was down past the webhook's attempts (or that reads them
/// instead of taking deliveries), in the manner of Stripe's events API.
/// Each event has the id its delivery has (`webhook-id`) and, as `event`,
/// the delivery's body itself, written by the same function
/// (`AppEventDelivery.envelope`); `next` is the cursor of the next page,
/// and `has_more` says whether to ask for it now. The team is the
/// `/v1/users` routes' (`?team=`, `?client_id=`, or the one team served).
struct EventFeedRoute: Sendable {
    let feed: AppEventFeed
    let clients: AppleClients
    let apiKeys: APIKeyVerifier
    let logger: Logger

    static let defaultLimit = 100
    static let limits = 1...1000

    func register(on router: Router<BasicRequestContext>) {
        let v1 = router.group("v1", context: APIKeyContext.self).add(middleware: APIKeyMiddleware(verifier: apiKeys))
        v1.get("events") { request, _ in await answer(request) }
    }

    func answer(_ request: Request) async -> Response {
        let team: String
        switch UserRoutes.team(of: request, clients: clients) {
        case .success(let named): team = named
        case .failure(let refusal): return refusal.response
        }
        let query = request.uri.queryParameters
        var limit = Self.defaultLimit
        if let text = query["limit"] {
            guard let asked = Int(String(text)), Self.limits.contains(asked) else {
                return APIResponse.error(.badRequest, "bad_limit",
                                         "limit must be an integer from \(Self.limits.lowerBound) to \(Self.limits.upperBound) (default \(Self.defaultLimit))")
            }
            limit = asked
        }
        var cursor: AppEventFeed.Cursor?
        if let text = query["after"] {
            guard let parsed = AppEventFeed.Cursor(eventID: String(text)) else {
                return APIResponse.error(.badRequest, "bad_cursor",
                                         "after must be an event's id as siwa gave it (an event's id or a page's next)")
            }
            cursor = parsed
        }
        do {
            switch try await feed.page(team: team, withTeamless: clients.allTeams.count == 1, after: cursor, limit: limit) {
            case .unknownCursor:
                return APIResponse.error(.badRequest, "unknown_cursor", "after names no event siwa recorded")
            case .expiredCursor:
                return APIResponse.error(.gone, "cursor_expired",
                                         "the next event after this cursor is older than the feed's retention (SIWA_EVENTS_FEED_RETENTION_DAYS): resynchronise from GET /v1/users/{apple_sub}, or ask an admin for siwa webhooks replay")
            case .events(let events, let hasMore):
                let next = events.last?.id ?? cursor.map { "evt_\($0.seq)_\($0.position)" }
                return JSONResponse.answer(.ok, ByteBuffer(bytes: Self.body(events, hasMore: hasMore, next: next)))
            }
        } catch {
            logger.warning("GET /v1/events could not reach the database", metadata: ["error": "\(safeDescription(error))"])
            var response = APIResponse.error(.serviceUnavailable, "unavailable", "the database is unavailable; retry later")
            response.headers[.retryAfter] = "5"
            return response
        }
    }

    /// `{"events":[{"event":<the webhook's body>,"id":…},…],"has_more":…,"next":…}`,
    /// keys sorted as every answer's (`AnswerJSON`); each body as the
    /// worker sends it, byte for byte, so a backend hands it to the code
    /// that takes its deliveries.
    static func body(_ events: [AppEventFeed.Event], hasMore: Bool, next: String?) -> Data {
        var body = Data(#"{"events":["#.utf8)
        for (index, event) in events.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body.append(contentsOf: #"{"event":"#.utf8)
            body.append(AppEventDelivery.envelope(type: event.type, timestamp: event.timestamp, data: event.data))
            body.append(contentsOf: #","id":\#(JSONText.quoted(event.id))}"#.utf8)
        }
        body.append(contentsOf: #"],"has_more":\#(hasMore)"#.utf8)
        if let next { body.append(contentsOf: #","next":\#(JSONText.quoted(next))"#.utf8) }
        body.append(UInt8(ascii: "}"))
        return body
    }
}
