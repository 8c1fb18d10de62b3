import AccountStore
import Foundation
import NIOCore
import SIWAServer
import Testing

/// The admin listener's guards on their own: the per-address and per-key
/// failure limits (times given, not waited for) and the page's CSRF tokens.
@Suite("Admin guards")
struct AdminGuardTests {
    static func address(_ text: String) throws -> AuthFailureLimiter.Address {
        AuthFailureLimiter.Address(try SocketAddress(ipAddress: text, port: 40000))
    }

    /// Prefixes count on their own, beside the address: one key's failures
    /// refuse that key only, until the address reaches its larger limit.
    @Test func aKeyPrefixIsRefusedAloneUntilTheAddressReachesItsLimit() throws {
        let limiter = AuthFailureLimiter(limit: 2, addressLimit: 8)
        let tunnel = try Self.address("127.0.0.1")
        let start = ContinuousClock.now
        for _ in 0..<2 {
            limiter.recordFailure(keyPrefix: "siwa_aliceaaaaaaa", now: start)
            limiter.recordFailure(tunnel, now: start)
        }
        #expect(limiter.refusal(forKeyPrefix: "siwa_aliceaaaaaaa", now: start) == 60)
        #expect(limiter.refusal(forKeyPrefix: "siwa_bobbbbbbbbbb", now: start) == nil, "another key from the same address")
        #expect(limiter.refusal(for: tunnel, now: start) == nil)
        for index in 0..<6 {
            limiter.recordFailure(keyPrefix: "siwa_guess\(index)", now: start)
            limiter.recordFailure(tunnel, now: start)
        }
        #expect(limiter.refusal(for: tunnel, now: start) == 60, "eight failures: the address is refused")
        #expect(limiter.refusal(forKeyPrefix: "siwa_aliceaaaaaaa", now: start + .seconds(60)) == nil)
        #expect(limiter.refusal(for: tunnel, now: start + .seconds(60)) == nil)
    }

    @Test func anAddressIsRefusedForTheRestOfItsMinuteOnceItReachesTheLimit() throws {
        let limiter = AuthFailureLimiter(limit: 3)
        let start = ContinuousClock.now
        let guesser = try Self.address("203.0.113.7"), neighbour = try Self.address("203.0.113.8")
        #expect(!limiter.recordFailure(guesser, now: start))
        #expect(!limiter.recordFailure(guesser, now: start + .seconds(10)))
        #expect(limiter.refusal(for: guesser, now: start + .seconds(10)) == nil)
        #expect(limiter.recordFailure(guesser, now: start + .seconds(20)), "the third reaches the limit")
        #expect(limiter.refusal(for: guesser, now: start + .seconds(20)) == 40)
        #expect(limiter.refusal(for: guesser, now: start + .milliseconds(59_500)) == 1)
        #expect(limiter.refusal(for: neighbour, now: start + .seconds(20)) == nil, "each address counts alone")
        // The minute over, the address starts afresh.
        #expect(limiter.refusal(for: guesser, now: start + .seconds(60)) == nil)
        #expect(!limiter.recordFailure(guesser, now: start + .seconds(61)))
        #expect(limiter.refusal(for: guesser, now: start + .seconds(61)) == nil)
    }

    @Test func anIPv6HostCountsByItsSlash64() throws {
        let limiter = AuthFailureLimiter(limit: 2)
        let now = ContinuousClock.now
        limiter.recordFailure(try Self.address("2001:db8:1:2::1"), now: now)
        limiter.recordFailure(try Self.address("2001:db8:1:2:ffff::9"), now: now)
        #expect(limiter.refusal(for: try Self.address("2001:db8:1:2::abcd"), now: now) != nil)
        #expect(limiter.refusal(for: try Self.address("2001:db8:1:3::1"), now: now) == nil)
    }

    /// A flood from many addresses fills the fixed table and pushes out
    /// the oldest counts; memory stays the same.
    @Test func aFloodOfAddressesCannotGrowTheTable() throws {
        let limiter = AuthFailureLimiter(limit: 2)
        let start = ContinuousClock.now
        let guesser = try Self.address("198.51.100.1")
        limiter.recordFailure(guesser, now: start)
        limiter.recordFailure(guesser, now: start)
        #expect(limiter.refusal(for: guesser, now: start) != nil)
        for index in 0..<(AuthFailureLimiter.capacity * 4) {
            let address = try Self.address("10.\(index >> 16 & 255).\(index >> 8 & 255).\(index & 255)")
            limiter.recordFailure(address, now: start + .seconds(1))
        }
        // Pushed out by newer addresses: the price of a fixed size, and a guesser gains
        // only what the flood costs them.
        #expect(limiter.refusal(for: guesser, now: start + .seconds(1)) == nil)
        #expect(limiter.refusal(for: try Self.address("10.0.0.1"), now: start + .seconds(1)) == nil, "one failure is under the limit")
    }

    @Test func aCSRFTokenIsGoodForItsKeyAndItsLifetimeOnly() {
        let tokens = CSRFTokens(lifetime: 3600)
        let alice = APIKeyIdentity(id: 1, name: "alice", scope: .admin), bob = APIKeyIdentity(id: 2, name: "bob", scope: .admin)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let token = tokens.token(for: alice, at: now)
        #expect(tokens.isValid(token, for: alice, at: now.addingTimeInterval(3599)))
        #expect(!tokens.isValid(token, for: bob, at: now), "another key's page")
        #expect(!tokens.isValid(token, for: alice, at: now.addingTimeInterval(3601)), "expired")
        #expect(!CSRFTokens().isValid(token, for: alice, at: now), "another process's secret")
        let (time, mac) = (token.split(separator: ".")[0], token.split(separator: ".")[1])
        #expect(!tokens.isValid("\(Int(time)! + 1).\(mac)", for: alice, at: now), "a moved time")
        for bad in ["", ".", "x.y", "\(time).", "\(time)", token + "0", String(token.dropLast())] {
            #expect(!tokens.isValid(bad, for: alice, at: now), "\(bad)")
        }
    }
}
