import ChildProcesses
import Foundation

/// The real `siwa worker` (the release binary next to siwa-bench) in its
/// own process, as the runtime role, with sign-in settings: what validates
/// the stored refresh tokens. JSON logs to a file, as for ServeProcess.
struct WorkerProcess {
    let process: ChildProcess
    let logFile: String

    static func start(databaseURL: String, settings: [String: String]) throws -> WorkerProcess {
        let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-bench-worker-\(getpid())-\(UUID().uuidString.prefix(8)).log").path
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SIWA_") }
        // The metrics listener off: bench runs must not depend on port 9091 being free.
        // The erasure ledger in a throwaway directory, as the bench's database is.
        environment.merge(["SIWA_DATABASE_URL": databaseURL, "SIWA_LOG_FORMAT": "json", "SIWA_WORKER_METRICS_PORT": "off",
                           "SIWA_ERASURE_LEDGER_DIR": FileManager.default.temporaryDirectory.appendingPathComponent("siwa-bench-erasures").path]) { $1 }
        for name in ["SIWA_LOG_LEVEL", "SIWA_LOG_FORMAT"] {
            if let value = ProcessInfo.processInfo.environment[name] { environment[name] = value }
        }
        environment.merge(settings) { $1 }
        let process = try ChildProcess(executable: try BenchDatabase.siwaBinary(), arguments: ["worker"], environment: environment,
                                       outputFile: logFile)
        return WorkerProcess(process: process, logFile: logFile)
    }

    var cpuSeconds: Double { processCPUSeconds(process.pid) }

    /// SIGTERM, as systemd stops it; SIGKILL after `grace` (an idle
    /// validator sleeps out its 30 s poll first). Returns how long it took
    /// to exit on SIGTERM, nil when it had to be killed. The log file is
    /// removed unless the worker failed.
    func stop(grace: Duration = .seconds(5)) async -> Duration? {
        let start = ContinuousClock.now
        process.signal(SIGTERM)
        guard let status = await process.wait(atMost: grace) else {
            try? FileManager.default.removeItem(atPath: logFile)
            return nil
        }
        let took = ContinuousClock.now - start
        if status == 0 { try? FileManager.default.removeItem(atPath: logFile) }
        return took
    }
}
