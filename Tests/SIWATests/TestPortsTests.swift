import AppleSimulator
import Foundation
import Hummingbird
import Logging
import Testing

/// The tests' own ports (Support/TestPorts.swift): below the ephemeral
/// range, and a server whose port was taken fails at once with EADDRINUSE
/// (not a wait for a port never bound), so the next port is tried.
@Suite("Test ports", .timeLimit(.minutes(2)))
struct TestPortsTests {
    @Test func portsComeFromBelowTheEphemeralRange() throws {
        let text = try String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
        let ephemeralStart = try #require(text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) })
        let ports = try (0..<50).map { _ in try TestPorts.free() }
        #expect(ports.allSatisfy { $0 >= 1024 && $0 < ephemeralStart && $0 < 25_000 }, "\(ports)")
        #expect(Set(ports).count == ports.count, "no port handed out twice in a row")
    }

    @Test func aTakenPortFailsAtOnceAndTheNextIsTried() async throws {
        _ = quietLogging
        let logger = Logger(label: "siwa.test-ports")
        let router = Router(context: BasicRequestContext.self)
        router.get("/") { _, _ in "first" }
        let first = try await TestPorts.serve { try await RunningServer.start(router: router, port: $0, logger: logger) }
        let started = ContinuousClock.now
        let error = await #expect(throws: (any Error).self) {
            let second = try await RunningServer.start(router: router, port: first.port, logger: logger)
            await second.stop()
        }
        #expect(error.map(TestPorts.isAddressInUse) == true, "\(String(describing: error))")
        #expect(ContinuousClock.now - started < .seconds(10))

        // TestPorts.serve goes on to another port when the one it tried is taken.
        let tried = Locked<[Int]>([])
        let other = try await TestPorts.serve { port in
            let given = tried.withLock { tried in
                tried.append(port)
                return tried.count == 1 ? first.port : port
            }
            return try await RunningServer.start(router: router, port: given, logger: logger)
        }
        #expect(tried.withLock { $0.count } == 2)
        #expect(other.port != first.port)
        await other.stop()
        await first.stop()
    }
}
