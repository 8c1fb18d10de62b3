import Foundation

/// A page of `GET /v1/events` (`SIWAClient.events`): the events in order,
/// each as its webhook delivers it, and where the next page starts.
public struct AppEventPage: Sendable, Equatable {
    public let events: [AppEvent]
    /// More events wait after these: ask again from `next` now.
    public let hasMore: Bool
    /// The cursor to ask from next (keep it with what you have processed):
    /// the last event's id, else the `after` asked; nil only when the feed
    /// held no event and none was given.
    public let next: String?

    public init(events: [AppEvent], hasMore: Bool, next: String?) {
        self.events = events
        self.hasMore = hasMore
        self.next = next
    }
}
