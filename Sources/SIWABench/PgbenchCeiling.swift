import AccountStore
import ChildProcesses
import Foundation

/// The ceiling: pgbench running the very statement siwa runs
/// (RecordNotificationStatement.sql), one notification per transaction, on
/// the same server, in the same run.
enum PgbenchCeiling {
    /// The statement with each `$n::type[]` array parameter replaced by a
    /// one-element array of pgbench variables and constants shaped like the
    /// notifications the load test sends.
    static func script() -> String {
        var sql = RecordNotificationStatement.sql
        let substitutions: [(String, String)] = [
            ("$10", "''"),
            ("$11", "''"),
            ("$12", "false"),
            ("$1", "('pgb-' || :client_id || '-' || :n)"),
            ("$2", "'email-enabled'"),
            ("$3", "('bench-sub-' || :s)"),
            ("$4", "(:ms)"),
            ("$5", "'com.example.siwa.bench'"),
            ("$6", "now()"),
            ("$7", #"'{"iss":"https://appleid.apple.com","aud":"com.example.siwa.bench","events":{"type":"email-enabled"}}'"#),
            ("$8", "(CASE WHEN :e = 1 THEN 'true' ELSE 'false' END)"),
            ("$9", "'bench@privaterelay.appleid.com'"),
        ]
        for (parameter, value) in substitutions {
            sql = sql.replacingOccurrences(of: parameter + "::", with: "ARRAY[" + value + "]::")
        }
        // pgbench takes one line per statement: drop `--` comments, join the rest.
        let oneLine = sql.split(separator: "\n")
            .map { line in (line.range(of: "--").map { line[..<$0.lowerBound] } ?? line[...]).trimmingCharacters(in: .whitespaces) }
            .joined(separator: " ")
        return """
            \\set n random(1, 2000000000)
            \\set s random(1, 5000)
            \\set e random(0, 1)
            \\set ms random(1600000000000, 1800000000000)
            \(oneLine);

            """
    }

    /// Runs pgbench for `seconds` with `clients`; returns transactions per second.
    static func run(databaseURL: String, clients: Int, seconds: Int) async throws -> Double {
        let scriptFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-pgbench-\(getpid()).sql")
        try script().write(to: scriptFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: scriptFile) }
        let output = try await Shell.run("pgbench", ["-n", "-M", "prepared", "-c", String(clients), "-j", "2", "-T", String(seconds),
                                              "-f", scriptFile.path, databaseURL])
        // "tps = 4567.123456 (without initial connection time)"
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
              let value = Double(line.dropFirst(6).prefix { $0 != " " }) else {
            throw BenchError("pgbench printed no tps:\n\(output)")
        }
        let failed = output.split(separator: "\n").first { $0.contains("number of failed transactions") } ?? ""
        if !failed.isEmpty, !failed.contains(": 0 ") { throw BenchError("pgbench had failures: \(failed)") }
        return value
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum Shell {
    /// Run a program from PATH to completion; returns stdout+stderr.
    static func run(_ program: String, _ arguments: [String]) async throws -> String {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-bench-\(UUID().uuidString).out").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let child = try ChildProcess(executable: program, arguments: arguments,
                                     environment: ProcessInfo.processInfo.environment, outputFile: output)
        let status = await child.wait()
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        guard status == 0 else { throw BenchError("\(program) failed (status \(status)):\n\(text)") }
        return text
    }
}
