import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with posix_spawn and reaped with waitpid.
/// (Foundation's Process on Linux sometimes never notices that a child
/// exited, leaving a zombie and a waiter that never wakes.)
final class ChildProcess: Sendable {
    let pid: pid_t
    private let exitStatus = Locked<Int32?>(nil)

    init(executable: String, arguments: [String], environment: [String: String], outputFile: String? = nil) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let output = outputFile ?? "/dev/null"
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard result == 0 else { throw TestSetupError("posix_spawn \(executable) failed: \(result)") }
        self.pid = pid
    }

    /// Exit status once the child has exited (128+signal if killed), else nil.
    var status: Int32? {
        if let known = exitStatus.withLock({ $0 }) { return known }
        var raw: Int32 = 0
        guard waitpid(pid, &raw, WNOHANG) == pid else { return nil }
        let signal = raw & 0x7f
        let code = signal == 0 ? (raw >> 8) & 0xff : 128 + signal
        exitStatus.withLock { $0 = code }
        return code
    }

    var isRunning: Bool { status == nil }

    func wait() async -> Int32 {
        while true {
            if let status { return status }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    func signal(_ number: Int32) { kill(pid, number) }
}

/// `siwa serve` as a real child process, for kill -9 and SIGTERM tests.
final class SIWAProcess: Sendable {
    let child: ChildProcess
    let port: Int
    let logFile: String

    init(port: Int, environment: [String: String], arguments: [String] = ["serve"]) throws {
        self.port = port
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        env["SIWA_HTTP_PORT"] = String(port)
        env["SIWA_HTTP_HOST"] = "127.0.0.1"
        logFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-\(UUID().uuidString).log").path
        child = try ChildProcess(executable: try TestEnvironment.siwaBinary.path, arguments: arguments,
                                 environment: env, outputFile: logFile)
    }

    var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    func waitUntilReady(timeout: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if !child.isRunning { throw TestSetupError("siwa exited: \(log.suffix(2000))") }
            if let ready = try? await HTTPAnswer.send(method: .GET, url: "http://127.0.0.1:\(port)/readyz", body: nil, headers: [],
                                                      timeout: .seconds(2)),
               ready.status == 200 { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestSetupError("siwa did not become ready: \(log.suffix(2000))")
    }

    func kill9() async {
        child.signal(SIGKILL)
        _ = await child.wait()
    }

    /// SIGTERM and wait; returns the exit status.
    func terminate() async -> Int32 {
        child.signal(SIGTERM)
        return await child.wait()
    }

    deinit {
        if child.isRunning { child.signal(SIGKILL) }
        try? FileManager.default.removeItem(atPath: logFile)
    }
}

/// A loopback TCP port that was free a moment ago.
func freePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSetupError("socket() failed") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
    }
    guard bound == 0 else { throw TestSetupError("bind() failed") }
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else { throw TestSetupError("getsockname() failed") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Runs the throwaway-cluster script (stop/start the fault cluster).
func pgScript(_ arguments: String...) async throws {
    let child = try ChildProcess(executable: "/bin/bash", arguments: [TestEnvironment.pgScript] + arguments,
                                 environment: ProcessInfo.processInfo.environment)
    let status = await child.wait()
    guard status == 0 else { throw TestSetupError("testdb.sh \(arguments) failed: \(status)") }
}

/// A value shared between test tasks.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
}
