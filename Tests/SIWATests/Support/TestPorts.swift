import Foundation
import NIOCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Loopback ports for the tests' servers (the simulator, webhook receivers,
/// siwa serve in-process or as a child, the worker's metrics listener),
/// taken below the kernel's ephemeral range as scripts/testdb.sh takes
/// PostgreSQL's. A port from a bind to port 0 is in that range, where the
/// run's own outgoing connections take their local ports: a server
/// restarted on its port (the kill -9 tests) could find one of them
/// holding it. Below the range only another test server can hold a port,
/// and several test processes (and worktrees) pick at once, so each process
/// scans from a random place of its own, a port is tried by binding it,
/// and another is taken while the answer is EADDRINUSE.
enum TestPorts {
    /// Below the ephemeral range's first port and below testdb.sh's
    /// PostgreSQL ports (25432 up to about 32300).
    static let range: Range<Int> = {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let ephemeralStart = text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32768
        let end = min(ephemeralStart, 25_000)
        return max(1024, end - 15_000)..<max(1025, end)
    }()

    /// The next port this process tries; each process starts at a random one.
    private static let cursor = Mutex(Int.random(in: range))

    /// A port of `range` that this process has not handed out lately (the
    /// cursor goes round the range once before it repeats one).
    private static func nextCandidate() -> Int {
        cursor.withLock { next in
            defer { next = next + 1 < range.upperBound ? next + 1 : range.lowerBound }
            return next
        }
    }

    /// A port below the ephemeral range that could be bound a moment ago,
    /// for a server that binds it itself (a child process, or a URL that
    /// must find nobody listening).
    static func free() throws -> Int {
        for _ in 0..<500 {
            let port = nextCandidate()
            if canBind(port) { return port }
        }
        throw TestSetupError("no free loopback port in \(range)")
    }

    /// Starts a server on a port from `free()`, and again on another port
    /// while the bind fails with EADDRINUSE (another process took the port
    /// between the try and the server's own bind).
    static func serve<T>(_ start: (Int) async throws -> T) async throws -> T {
        try await retryingWhileInUse { try await start(try Self.free()) }
    }

    /// Runs `body` (which takes its ports from `free()`) again while it
    /// fails with EADDRINUSE, at most 20 times.
    static func retryingWhileInUse<T>(_ body: () async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do { return try await body() } catch let error where attempt < 20 && isAddressInUse(error) {
                attempt += 1
            }
        }
    }

    /// The bind failed because the port is taken (NIO's IOError, or a
    /// child's log that says so).
    static func isAddressInUse(_ error: any Error) -> Bool {
        if let io = error as? IOError, io.errnoCode == EADDRINUSE { return true }
        return String(describing: error).contains("Address already in use")
    }

    /// Whether a listening socket could bind 127.0.0.1:`port` now (without
    /// SO_REUSEADDR: a port with connections still in TIME_WAIT is passed over).
    private static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return bound == 0
    }
}
