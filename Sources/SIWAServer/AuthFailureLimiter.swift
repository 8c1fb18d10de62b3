import NIOCore
import Synchronization

/// Failed admin authentications per source address, in a table of fixed
/// size: at most `limit` a minute per address; past that, the address is
/// refused (429) until its minute is over.
///
/// The table holds `capacity` addresses whatever comes (no allocation per
/// address): each address hashes (with the process's random seed) to a
/// run of `probes` slots; a new address takes a free or expired slot of its
/// run, else the one whose minute began first. A flood from many addresses
/// can so push out another address's count early, but never grow memory.
/// IPv6 addresses count by their /64, which one host usually holds whole.
public final class AuthFailureLimiter: Sendable {
    /// An address as the table keys it: IPv4's 32 bits, IPv6's first 64.
    public struct Address: Hashable, Sendable, CustomStringConvertible {
        let bits: UInt64
        let isIPv6: Bool
        let text: String

        public init(_ address: SocketAddress?) {
            switch address {
            case .v4(let v4):
                bits = UInt64(UInt32(bigEndian: v4.address.sin_addr.s_addr))
                isIPv6 = false
            case .v6(let v6):
                bits = withUnsafeBytes(of: v6.address.sin6_addr) { raw in raw.prefix(8).reduce(0) { $0 << 8 | UInt64($1) } }
                isIPv6 = true
            default:
                bits = 0
                isIPv6 = false
            }
            text = address?.ipAddress ?? "unknown"
        }

        public var description: String { text }

        public static func == (a: Address, b: Address) -> Bool { a.bits == b.bits && a.isIPv6 == b.isIPv6 }
        public func hash(into hasher: inout Hasher) {
            hasher.combine(bits)
            hasher.combine(isIPv6)
        }
    }

    struct Slot {
        var address: Address
        var windowStart: ContinuousClock.Instant
        var failures: Int
    }

    public static let capacity = 4096
    static let probes = 8
    let limit: Int
    let window: Duration
    private let slots: Mutex<[Slot?]>

    public init(limit: Int, window: Duration = .seconds(60)) {
        self.limit = limit
        self.window = window
        slots = Mutex(Array(repeating: nil, count: Self.capacity))
    }

    /// Whole seconds to wait when `address` is refused now, else nil.
    public func refusal(for address: Address, now: ContinuousClock.Instant = .now) -> Int? {
        slots.withLock { slots in
            guard let index = find(address, in: slots), let slot = slots[index],
                  slot.failures >= limit, now < slot.windowStart + window else { return nil }
            let remaining = (slot.windowStart + window) - now
            return max(1, Int(remaining.components.seconds) + (remaining.components.attoseconds > 0 ? 1 : 0))
        }
    }

    /// Counts a failure; true when it is the one that reaches the limit.
    @discardableResult
    public func recordFailure(_ address: Address, now: ContinuousClock.Instant = .now) -> Bool {
        slots.withLock { slots in
            if let index = find(address, in: slots), var slot = slots[index], now < slot.windowStart + window {
                slot.failures += 1
                slots[index] = slot
                return slot.failures == limit
            }
            slots[place(address, in: slots, now: now)] = Slot(address: address, windowStart: now, failures: 1)
            return limit == 1
        }
    }

    private func run(_ address: Address) -> [Int] {
        let start = Int(UInt(bitPattern: address.hashValue) % UInt(Self.capacity))
        return (0..<Self.probes).map { (start + $0) % Self.capacity }
    }

    private func find(_ address: Address, in slots: [Slot?]) -> Int? {
        run(address).first { slots[$0]?.address == address }
    }

    /// The address's own slot, a free or expired one, else the oldest.
    private func place(_ address: Address, in slots: [Slot?], now: ContinuousClock.Instant) -> Int {
        let candidates = run(address)
        if let own = candidates.first(where: { slots[$0]?.address == address }) { return own }
        if let free = candidates.first(where: { slots[$0].map { now >= $0.windowStart + window } ?? true }) { return free }
        return candidates.min { (slots[$0]?.windowStart ?? now) < (slots[$1]?.windowStart ?? now) } ?? candidates[0]
    }
}
