import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with posix_spawn and reaped with waitpid, for
/// `siwa-demo`, `siwa-bench` and the tests.
///
/// Not Foundation's Process: on Linux it sometimes never notices that a
/// child exited (a zombie, and a waiter that never wakes). And the child
/// starts with no blocked signals: Swift's worker threads block some, a
/// spawned child inherits that mask, and pgbench then never sees the SIGALRM
/// that ends a `-T` run.
///
/// The child gets only stdin, stdout, stderr and the `descriptors` asked
/// for: every other descriptor is closed in it. Without that, a test's
/// child inherited the test process's PostgreSQL sockets (NIO opens them
/// without close-on-exec), and when the test process crashed the orphaned
/// child kept a transaction of the test's open, "idle in transaction",
/// holding its locks and connection (and, before the sealer looked only
/// at its own database's writers, every database's audit sealing).
///
/// A child also gets `SIWA_TEST_RUN_MARKER` from this process's
/// environment when set: `make test` sets it, and after `swift test`
/// (even one that crashed) kills every process still carrying it
/// (`scripts/reap-children.sh`), so no `siwa` outlives the run.
public final class ChildProcess: Sendable {
    /// The environment variable `make test` marks its run's children with.
    public static let runMarkerVariable = "SIWA_TEST_RUN_MARKER"

    public let pid: pid_t
    private let exitStatus = Mutex<Int32?>(nil)

    /// - Parameters:
    ///   - executable: a path, or a bare name looked up in PATH.
    ///   - outputFile: where stdout and stderr go (appended); /dev/null if nil.
    ///   - descriptors: more open files the child gets, each as the number
    ///     `child` (e.g. chromium's DevTools pipe on 3 and 4).
    public init(executable: String, arguments: [String], environment: [String: String], outputFile: String? = nil,
                descriptors: [(child: Int32, parent: Int32)] = []) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor in descriptors { posix_spawn_file_actions_adddup2(&actions, descriptor.parent, descriptor.child) }
        posix_spawn_file_actions_addopen(&actions, 1, outputFile ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // Everything above the last descriptor the child asked for.
        Self.closeFrom(&actions, (descriptors.map(\.child).max() ?? 2) + 1)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))

        var environment = environment
        if let marker = ProcessInfo.processInfo.environment[Self.runMarkerVariable] {
            environment[Self.runMarkerVariable] = marker
        }
        let words: [String] = [executable] + arguments
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw ChildProcessError(description: "cannot start \(executable) (error \(result))") }
        self.pid = pid
    }

    /// glibc's posix_spawn_file_actions_addclosefrom_np (2.34 and later),
    /// which Swift's Glibc module does not import: found at run time.
    private static func closeFrom(_ actions: inout posix_spawn_file_actions_t, _ lowest: Int32) {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return }
        _ = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, lowest)
    }

    /// Exit status once the child has exited (128 + signal if killed), else nil.
    public var status: Int32? {
        if let known = exitStatus.withLock({ $0 }) { return known }
        var raw: Int32 = 0
        guard waitpid(pid, &raw, WNOHANG) == pid else { return nil }
        let signal = raw & 0x7f
        let code = signal == 0 ? (raw >> 8) & 0xff : 128 + signal
        exitStatus.withLock { $0 = code }
        return code
    }

    public var isRunning: Bool { status == nil }

    /// Waits for the exit without holding a thread of the cooperative pool.
    public func wait() async -> Int32 {
        while true {
            if let status { return status }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Waits for the exit at most `limit`; past it, kills the child
    /// (SIGKILL) and returns nil.
    public func wait(atMost limit: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let status { return status }
            try? await Task.sleep(for: .milliseconds(10))
        }
        if let status { return status }
        signal(SIGKILL)
        _ = await wait()
        return nil
    }

    public func signal(_ number: Int32) { kill(pid, number) }

    /// Runs a program to its end, its stdout and stderr together in a
    /// temporary file: the exit status (nil: still running at `limit`, and
    /// killed) and what it wrote.
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String],
                           limit: Duration) async throws -> (status: Int32?, output: String) {
        let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-run-\(UUID().uuidString).out").path
        defer { try? FileManager.default.removeItem(atPath: outputFile) }
        let child = try ChildProcess(executable: executable, arguments: arguments, environment: environment, outputFile: outputFile)
        let status = await child.wait(atMost: limit)
        return (status, (try? String(contentsOfFile: outputFile, encoding: .utf8)) ?? "")
    }
}

public struct ChildProcessError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// A loopback TCP port that was free a moment ago.
public func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw ChildProcessError(description: "socket() failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
    }
    guard bound == 0 else { throw ChildProcessError(description: "bind() failed") }
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else { throw ChildProcessError(description: "getsockname() failed") }
    return Int(UInt16(bigEndian: address.sin_port))
}
