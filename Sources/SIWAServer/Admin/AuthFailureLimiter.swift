import NIOCore
import Synchronization

/// Failed admin authentications per key prefix and per source address, in
/// one table of fixed size: at most `limit` a minute per key prefix (a
/// malformed key counts as one prefix of its own) and `addressLimit` per
/// address; past either, that prefix, or the whole address, is refused
/// (429) until its minute is over. Behind an ssh tunnel every admin comes
/// from 127.0.0.1: one admin's typos lock out their own key's prefix, not
/// the others', and the address's larger limit still stops a guesser who
/// tries many prefixes.
///
/// The table holds `capacity` counts whatever comes (no allocation per
/// address or prefix): each hashes (with the process's random seed) to a
/// run of `probes` slots; a new one takes a free or expired slot of its
/// run, else the one whose minute began first. A flood from many addresses
/// can so push out another count early, but never grow memory.
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

    /// What a count is kept for: an address, or the prefix of the key presented.
    enum Subject: Hashable {
        case address(Address)
        case keyPrefix(String)
    }

    struct Slot {
        var subject: Subject
        var windowStart: ContinuousClock.Instant
        var failures: Int
    }

    public static let capacity = 4096
    static let probes = 8
    /// Failures a minute per key prefix.
    let limit: Int
    /// Failures a minute per address, whatever the prefixes.
    let addressLimit: Int
    let window: Duration
    private let slots: Mutex<[Slot?]>

    /// `addressLimit` defaults to `limit`: one count per address, as
    /// before prefixes were counted.
    public init(limit: Int, addressLimit: Int? = nil, window: Duration = .seconds(60)) {
        self.limit = limit
        self.addressLimit = addressLimit ?? limit
        self.window = window
        slots = Mutex(Array(repeating: nil, count: Self.capacity))
    }

    /// The admin listener's address limit for a per-prefix `limit`: a few
    /// admins' typos behind one tunnel, not a guesser's run of prefixes.
    public static func addressLimit(forKeyPrefixLimit limit: Int) -> Int { limit * 4 }

    /// Whole seconds to wait when `address` is refused now, else nil.
    public func refusal(for address: Address, now: ContinuousClock.Instant = .now) -> Int? {
        refusal(.address(address), now: now)
    }

    /// Whole seconds to wait when keys with `prefix` are refused now, else nil.
    public func refusal(forKeyPrefix prefix: String, now: ContinuousClock.Instant = .now) -> Int? {
        refusal(.keyPrefix(prefix), now: now)
    }

    /// Counts a failure from `address`; true when it is the one that reaches the limit.
    @discardableResult
    public func recordFailure(_ address: Address, now: ContinuousClock.Instant = .now) -> Bool {
        recordFailure(.address(address), now: now)
    }

    /// Counts a failure of a key with `prefix`; true when it is the one that reaches the limit.
    @discardableResult
    public func recordFailure(keyPrefix prefix: String, now: ContinuousClock.Instant = .now) -> Bool {
        recordFailure(.keyPrefix(prefix), now: now)
    }

    private func limit(of subject: Subject) -> Int {
        if case .address = subject { return addressLimit }
        return limit
    }

    private func refusal(_ subject: Subject, now: ContinuousClock.Instant) -> Int? {
        slots.withLock { slots in
            guard let index = find(subject, in: slots), let slot = slots[index],
                  slot.failures >= limit(of: subject), now < slot.windowStart + window else { return nil }
            let remaining = (slot.windowStart + window) - now
            return max(1, Int(remaining.components.seconds) + (remaining.components.attoseconds > 0 ? 1 : 0))
        }
    }

    private func recordFailure(_ subject: Subject, now: ContinuousClock.Instant) -> Bool {
        let limit = limit(of: subject)
        return slots.withLock { slots in
            if let index = find(subject, in: slots), var slot = slots[index], now < slot.windowStart + window {
                slot.failures += 1
                slots[index] = slot
                return slot.failures == limit
            }
            slots[place(subject, in: slots, now: now)] = Slot(subject: subject, windowStart: now, failures: 1)
            return limit == 1
        }
    }

    private func run(_ subject: Subject) -> [Int] {
        let start = Int(UInt(bitPattern: subject.hashValue) % UInt(Self.capacity))
        return (0..<Self.probes).map { (start + $0) % Self.capacity }
    }

    private func find(_ subject: Subject, in slots: [Slot?]) -> Int? {
        run(subject).first { slots[$0]?.subject == subject }
    }

    /// The subject's own slot, a free or expired one, else the oldest.
    private func place(_ subject: Subject, in slots: [Slot?], now: ContinuousClock.Instant) -> Int {
        let candidates = run(subject)
        if let own = candidates.first(where: { slots[$0]?.subject == subject }) { return own }
        if let free = candidates.first(where: { slots[$0].map { now >= $0.windowStart + window } ?? true }) { return free }
        return candidates.min { (slots[$0]?.windowStart ?? now) < (slots[$1]?.windowStart ?? now) } ?? candidates[0]
    }
}
