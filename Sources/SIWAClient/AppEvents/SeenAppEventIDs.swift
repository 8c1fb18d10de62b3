import Foundation
import HTTPTypes
import Synchronization

/// Where a receiver keeps the `webhook-id`s it has processed. siwa delivers
/// each event at least once (a retry after a lost 2xx, `siwa webhooks
/// replay`), always with the same id: a receiver answers 2xx again for an id
/// it has seen, without acting twice. Keep them as long as a replay may
/// reach back (in the app's database, beside what the event changed, is
/// best: one transaction for both).
public protocol SeenAppEventIDs: Sendable {
    /// Whether `id` was processed already.
    func contains(_ id: String) async throws -> Bool
    /// Records `id` as processed: called once acting on the event succeeded,
    /// so an event whose handling failed is acted on when siwa retries it.
    func insert(_ id: String) async throws
}

/// A bounded set in memory (the oldest id is forgotten first): for an
/// example or a test; it is empty again after a restart.
public final class InMemorySeenAppEventIDs: SeenAppEventIDs {
    private struct State {
        var ids: Set<String> = []
        var order: [String] = []
        var head = 0
    }

    public let capacity: Int
    private let state = Mutex(State())

    public init(capacity: Int = 100_000) {
        self.capacity = max(1, capacity)
    }

    public func contains(_ id: String) async throws -> Bool {
        state.withLock { $0.ids.contains(id) }
    }

    public func insert(_ id: String) async throws {
        state.withLock { state in
            guard state.ids.insert(id).inserted else { return }
            if state.order.count < capacity {
                state.order.append(id)
            } else {
                // A ring: the slot of the oldest id takes the new one.
                state.ids.remove(state.order[state.head])
                state.order[state.head] = id
                state.head = (state.head + 1) % capacity
            }
        }
    }
}

extension AppEventVerifier {
    /// What `receive` did with a delivery.
    public enum Reception: Sendable, Equatable {
        /// Verified, new, and handled: answer 2xx.
        case handled(AppEvent)
        /// Verified, and its id was processed before: answer 2xx, nothing done.
        case alreadySeen(AppEvent)
    }

    /// The whole of a receiver: verifies the delivery (throwing
    /// `AppEventVerificationError`: answer 4xx), skips an id seen before,
    /// else runs `handle` and then records the id. An error `handle` throws
    /// is rethrown and the id is not recorded: answer 5xx, and siwa retries.
    public func receive(headers: HTTPFields, body: Data, seen: some SeenAppEventIDs, now: Date = Date(),
                        handle: (AppEvent) async throws -> Void) async throws -> Reception {
        let event = try verify(headers: headers, body: body, now: now)
        if try await seen.contains(event.id) { return .alreadySeen(event) }
        try await handle(event)
        try await seen.insert(event.id)
        return .handled(event)
    }
}
