import ChildProcesses
import Foundation
import SIWAConfiguration
import Testing

/// The systemd units in deploy/: what siwa's code and docs rely on is in
/// them, and systemd itself accepts them (when systemd-analyze is here).
@Suite("deploy/ systemd units")
struct UnitFilesTests {
    static let deploy = TestEnvironment.repositoryRoot.appendingPathComponent("deploy")

    static func lines(_ unit: String) throws -> [String] {
        try String(contentsOf: deploy.appendingPathComponent(unit), encoding: .utf8)
            .split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
    }

    @Test(arguments: [("siwa-serve.service", "serve"), ("siwa-worker.service", "worker"), ("siwa-worker@.service", "worker")])
    func aServiceIsNotifyWithAWatchdogAChecksFirstAndDoesNotRestartOnConfiguration(_ unit: String, _ command: String) throws {
        let lines = try Self.lines(unit)
        for line in ["Type=notify", "NotifyAccess=main", "WatchdogSec=30s", "RestartPreventExitStatus=2 64", "Restart=on-failure",
                     "ExecStartPre=-/usr/local/bin/siwa check \(command)", "ExecStart=/usr/local/bin/siwa \(command)"] {
            #expect(lines.contains(line), "\(unit): no \(line)")
        }
    }

    /// Each credential of UnitCredentials, and no other, loaded with its
    /// blank default (a missing file is no start-up failure).
    @Test(arguments: [("siwa-serve.service", UnitCredentials.serve), ("siwa-worker.service", UnitCredentials.worker),
                      ("siwa-worker@.service", UnitCredentials.worker), ("siwa-migrate.service", UnitCredentials.migrate)])
    func theUnitsLoadTheCredentialsTheDocsName(_ unit: String, _ credentials: [UnitCredentials.Credential]) throws {
        let lines = try Self.lines(unit)
        let loaded = lines.filter { $0.hasPrefix("LoadCredential=") }
        #expect(loaded == credentials.map { "LoadCredential=\($0.setting):\($0.file)" }, "\(unit)")
        for credential in credentials {
            #expect(lines.contains("SetCredential=\(credential.setting):\\n"), "\(unit): no default for \(credential.setting)")
        }
        // No setting pointed into the credentials by hand any more.
        #expect(!lines.contains { $0.hasPrefix("Environment=SIWA_") && $0.contains("%d/") }, "\(unit)")
        let operations = try String(contentsOf: TestEnvironment.repositoryRoot.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        for credential in credentials {
            #expect(operations.contains("| `\(credential.file)` | `\(credential.setting)`"), "docs/operations.md does not name \(credential.file)")
        }
    }

    /// The template is the worker's unit, with only its instance's lines changed.
    @Test func theTemplateIsTheWorkerUnitPerInstance() throws {
        let worker = try Self.lines("siwa-worker.service")
        let template = try Self.lines("siwa-worker@.service")
        let added = Set(template).subtracting(worker)
        let removed = Set(worker).subtracting(template)
        #expect(added == ["Description=siwa: Sign in with Apple purge-job worker %i", "EnvironmentFile=-/etc/siwa/worker@%i.env",
                          "SyslogIdentifier=siwa-worker@%i", "Environment=SIWA_WORKER_METRICS_PORT=off", "DefaultInstance=1"])
        #expect(removed == ["Description=siwa: Sign in with Apple purge-job worker", "SyslogIdentifier=siwa-worker"])
    }

    @Test func systemdAcceptsTheUnits() async throws {
        guard let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first(where: FileManager.default.isExecutableFile) else {
            // make test-package runs it on the installed units too.
            print("systemd-analyze is not installed: the units' syntax is not checked here")
            return
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-units-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var paths: [String] = []
        for unit in ["siwa-serve.service", "siwa-worker.service", "siwa-migrate.service", "siwa-worker@.service"] {
            // verify wants ExecStart='s binary to exist: the one built here.
            let text = try String(contentsOf: Self.deploy.appendingPathComponent(unit), encoding: .utf8)
                .replacingOccurrences(of: "/usr/local/bin/siwa", with: try TestEnvironment.siwaBinary.path)
            let path = directory.appendingPathComponent(unit == "siwa-worker@.service" ? "siwa-worker@1.service" : unit).path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            paths.append(path)
        }
        let output = directory.appendingPathComponent("verify.log").path
        let child = try ChildProcess(executable: analyze, arguments: ["verify"] + paths,
                                     environment: ProcessInfo.processInfo.environment, outputFile: output)
        let status = await child.wait()
        let log = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        // Complaints about the machine (no such user, no unit it is ordered
        // after) are not about the files; syntax ones are.
        let complaints = log.split(separator: "\n").filter { line in
            line.contains(directory.path) && !line.contains("Failed to resolve") && !line.contains("unit file")
        }
        #expect(complaints.isEmpty, "exit \(status): \(log)")
    }
}
