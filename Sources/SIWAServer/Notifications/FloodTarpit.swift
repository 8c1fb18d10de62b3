import Synchronization

/// Holds the answer to a refused delivery for a while during a flood of
/// junk (`SIWA_FLOOD_DELAY_SECONDS`).
///
/// A sender that waits for each answer (an HTTP/1.1 client does) then sends
/// at most one request per delay on each connection, so a flood stops
/// taking the CPU that Apple's genuine notifications need: their answers are
/// never held (only refusals are, and only while refusals arrive faster than
/// SIWA_REJECTIONS_PER_MINUTE spreads over a minute, and for 30 s after).
/// At most `maxHeld`
/// answers are held at once; past that they go out at once, so a flood
/// cannot pile up waiting tasks without bound.
final class FloodTarpit: Sendable {
    let delay: Duration
    let maxHeld: Int
    private let held = Atomic<Int>(0)

    init(delay: Duration, maxHeld: Int = 4096) {
        self.delay = delay
        self.maxHeld = maxHeld
    }

    func hold() async {
        guard delay > .zero else { return }
        guard held.add(1, ordering: .relaxed).newValue <= maxHeld else {
            held.subtract(1, ordering: .relaxed)
            return
        }
        defer { held.subtract(1, ordering: .relaxed) }
        // Half to one and a half times the delay, so the senders' next
        // requests do not all come back in one wave.
        try? await Task.sleep(for: delay * Double.random(in: 0.5...1.5))
    }
}
