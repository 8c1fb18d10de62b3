import AsyncHTTPClient
import ChildProcesses
import Foundation

/// The real `siwa serve` (the release binary next to siwa-bench), in its own
/// process with default settings and JSON logs at info level (the costlier
/// format: a line per notification), written to a file as journald takes them.
struct ServeProcess {
    let process: ChildProcess
    /// The public listener: notifications, health.
    let url: String
    /// The metrics listener: `/metrics`.
    let metricsURL: String
    /// The API listener (`/v1`; bound with sign-in on).
    let apiURL: String
    let logFile: String

    /// `settings`: more SIWA_* settings (sign-in's), over the defaults.
    static func start(databaseURL: String, clientID: String, jwksURL: String, http: HTTPClient,
                      settings: [String: String] = [:]) async throws -> ServeProcess {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("siwa").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw BenchError("\(binary) is missing: run `swift build -c release` first (make bench does)")
        }
        let port = try freeLoopbackPort()
        var apiPort = try freeLoopbackPort()
        while apiPort == port { apiPort = try freeLoopbackPort() }
        var metricsPort = try freeLoopbackPort()
        while metricsPort == port || metricsPort == apiPort { metricsPort = try freeLoopbackPort() }
        let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-bench-serve-\(getpid()).log").path
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SIWA_") }
        environment.merge([
            "SIWA_DATABASE_URL": databaseURL, "SIWA_HTTP_PORT": String(port), "SIWA_APPLE_CLIENT_IDS": clientID,
            "SIWA_APPLE_TEAM_ID": SignInCredentials.teamID,
            "SIWA_APPLE_JWKS_URL": jwksURL, "SIWA_LOG_FORMAT": "json",
            // Several serve processes at once: none takes the admin port, nor
            // the API listener's default one (only sign-in binds it).
            "SIWA_ADMIN_HTTP_PORT": "off", "SIWA_API_HTTP_PORT": String(apiPort), "SIWA_METRICS_HTTP_PORT": String(metricsPort),
        ]) { $1 }
        // Tuning and log settings from the caller's environment, for experiments.
        for name in ["SIWA_DATABASE_MAX_CONNECTIONS", "SIWA_INGEST_WRITERS", "SIWA_INGEST_MAX_BATCH", "SIWA_LOG_LEVEL", "SIWA_LOG_FORMAT"] {
            if let value = ProcessInfo.processInfo.environment[name] { environment[name] = value }
        }
        environment.merge(settings) { $1 }
        let process = try ChildProcess(executable: binary, arguments: ["serve"], environment: environment, outputFile: logFile)
        let serve = ServeProcess(process: process, url: "http://127.0.0.1:\(port)", metricsURL: "http://127.0.0.1:\(metricsPort)",
                                 apiURL: "http://127.0.0.1:\(apiPort)",
                                 logFile: logFile)
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            guard process.isRunning else { throw BenchError("siwa serve exited; its log is \(logFile)") }
            var request = HTTPClientRequest(url: serve.url + "/readyz")
            request.method = .GET
            if let response = try? await http.execute(request, timeout: .seconds(2)), response.status == .ok { return serve }
            try await Task.sleep(for: .milliseconds(100))
        }
        process.signal(SIGKILL)
        throw BenchError("siwa serve did not become ready in 30 s; its log is \(logFile)")
    }

    /// SIGTERM, as systemd stops it; the log file is removed after a clean exit.
    /// SIGTERM, then its drain for at most `grace`; past it, SIGKILL (its
    /// log is kept, and the run says where).
    func stop(grace: Duration = .seconds(30)) async {
        process.signal(SIGTERM)
        switch await process.wait(atMost: grace) {
        case 0: try? FileManager.default.removeItem(atPath: logFile)
        case nil: say("siwa serve did not stop within \(grace) of SIGTERM and was killed; its log: \(logFile)")
        default: break
        }
    }
}

extension ServeProcess {
    /// CPU seconds (user + system) the process has used so far, from
    /// /proc/PID/stat: per-notification CPU is steadier than a rate on a
    /// noisy machine.
    var cpuSeconds: Double { processCPUSeconds(process.pid) }
}

/// CPU seconds (user + system) process `pid` has used so far (/proc/PID/stat).
func processCPUSeconds(_ pid: pid_t) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let afterName = stat.lastIndex(of: ")") else { return .nan }
    // Fields after "(comm)": state is field 3; utime and stime are 14 and 15.
    let fields = stat[stat.index(after: afterName)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}
