import AppleSimulator
import ChildProcesses
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `siwa serve` as a real child process, for kill -9 and SIGTERM tests.
final class SIWAProcess: Sendable {
    let child: ChildProcess
    let port: Int
    /// The API listener's (`/v1`; sign-in on), 0: none.
    let apiPort: Int
    /// The metrics listener's (`/metrics`), 0: none.
    let metricsPort: Int
    let logFile: String
    /// Given back to ContractRecorder when the process is gone.
    private let registeredPorts: [Int]

    /// `port` 0: a command that does not listen (`siwa worker`).
    /// `apiPort` 0: no API listener (SIWA_API_HTTP_PORT=off) unless `environment` names one.
    /// `journal`: its output file stands for the journal's stream, as
    /// systemd announces one: `JOURNAL_STREAM` names the file's device and inode.
    init(port: Int = 0, apiPort: Int = 0, metricsPort: Int = 0, environment: [String: String], arguments: [String] = ["serve"],
         journal: Bool = false) throws {
        self.port = port
        self.apiPort = apiPort
        self.metricsPort = metricsPort
        var env = ProcessInfo.processInfo.environment
        // Off unless the test asks: two serve processes on one host would
        // both take 8081 and 8083 (and, with sign-in on, 8082), two workers 9091.
        env["SIWA_ADMIN_HTTP_PORT"] = "off"
        env["SIWA_API_HTTP_PORT"] = "off"
        env["SIWA_METRICS_HTTP_PORT"] = "off"
        env["SIWA_WORKER_METRICS_PORT"] = "off"
        env["SIWA_ERASURE_LEDGER_DIR"] = TestEnvironment.erasureLedgerDirectory
        for (key, value) in environment { env[key] = value }
        if port != 0 {
            env["SIWA_HTTP_PORT"] = String(port)
            env["SIWA_HTTP_HOST"] = "127.0.0.1"
        }
        if apiPort != 0 {
            env["SIWA_API_HTTP_PORT"] = String(apiPort)
            env["SIWA_API_HTTP_HOST"] = "127.0.0.1"
        }
        if metricsPort != 0 {
            env["SIWA_METRICS_HTTP_PORT"] = String(metricsPort)
            env["SIWA_METRICS_HTTP_HOST"] = "127.0.0.1"
        }
        logFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-\(UUID().uuidString).log").path
        if journal {
            // The child appends to this very file (same inode).
            guard FileManager.default.createFile(atPath: logFile, contents: nil) else { throw TestSetupError("cannot create \(logFile)") }
            var status = stat()
            guard stat(logFile, &status) == 0 else { throw TestSetupError("cannot stat \(logFile)") }
            env["JOURNAL_STREAM"] = "\(status.st_dev):\(status.st_ino)"
        }
        child = try ChildProcess(executable: try TestEnvironment.siwaBinary.path, arguments: arguments,
                                 environment: env, outputFile: logFile)
        // Its listeners' answers are kept for the contract check (ContractRecorder).
        var listeners: [Int: ContractRecorder.Listener] = [:]
        if arguments.first == "worker" {
            if let metrics = env["SIWA_WORKER_METRICS_PORT"].flatMap(Int.init), metrics != 0 { listeners[metrics] = .worker }
        } else {
            if port != 0 { listeners[port] = .public }
            if let api = env["SIWA_API_HTTP_PORT"].flatMap(Int.init), api != 0 { listeners[api] = .api }
            if let admin = env["SIWA_ADMIN_HTTP_PORT"].flatMap(Int.init), admin != 0 { listeners[admin] = .admin }
            if let metrics = env["SIWA_METRICS_HTTP_PORT"].flatMap(Int.init), metrics != 0 { listeners[metrics] = .metrics }
        }
        for (port, listener) in listeners { ContractRecorder.register(port: port, as: listener) }
        registeredPorts = Array(listeners.keys)
    }

    /// `siwa serve` as a child on ports from TestPorts (the public
    /// listener's, the metrics listener's and the API listener's, which only sign-in binds), ready
    /// (/readyz 200); started again on other ports if one picked was taken
    /// between the try and the child's own bind (its log says so).
    static func serve(environment: [String: String], journal: Bool = false) async throws -> SIWAProcess {
        try await TestPorts.retryingWhileInUse { () async throws -> SIWAProcess in
            let process = try SIWAProcess(port: try TestPorts.free(), apiPort: try TestPorts.free(), metricsPort: try TestPorts.free(),
                                          environment: environment, journal: journal)
            try await process.waitUntilReady()
            return process
        }
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

    /// Waits until the log holds `text` (e.g. "Worker started").
    /// `count`: at least that many times.
    func waitForLog(_ text: String, count: Int = 1, timeout: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if log.components(separatedBy: text).count > count { return }
            if !child.isRunning { throw TestSetupError("siwa exited before logging '\(text)': \(log.suffix(2000))") }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestSetupError("siwa did not log '\(text)': \(log.suffix(2000))")
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
        ContractRecorder.unregister(ports: registeredPorts)
        if child.isRunning { child.signal(SIGKILL) }
        try? FileManager.default.removeItem(atPath: logFile)
    }
}

/// A loopback TCP port below the ephemeral range that was free a moment
/// ago (TestPorts), for a child process to listen on or a URL nobody answers.
func freePort() throws -> Int { try TestPorts.free() }

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

/// Sends the items `0..<count` from `senders` concurrent tasks, which take
/// them in turn; each task sends its item again, `pause` apart, until `send`
/// answers true (as Apple retries a notification, and a backend a 503) or
/// `deadline` passes. For the fault tests' loads.
func sendEachUntilDone(count: Int, senders: Int, pause: Duration, until deadline: ContinuousClock.Instant? = nil,
                       _ send: @escaping @Sendable (Int) async -> Bool) async {
    let next = Locked(0)
    await withTaskGroup(of: Void.self) { group in
        for _ in 0..<senders {
            group.addTask {
                while true {
                    let i = next.withLock { n -> Int in defer { n += 1 }; return n }
                    guard i < count else { return }
                    while await !send(i), deadline.map({ ContinuousClock.now < $0 }) ?? true {
                        try? await Task.sleep(for: pause)
                    }
                }
            }
        }
    }
}
