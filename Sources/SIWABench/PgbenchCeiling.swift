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
        let sql = RecordNotificationStatement.sql
        let substitutions: [(String, String)] = [
            ("$10", "''"),
            ("$11", "''"),
            ("$12", "false"),
            ("$13", "0"),
            ("$14", "'\(SignInCredentials.teamID)'"),
            ("$1", "('pgb-' || :client_id || '-' || :n)"),
            ("$2", "'email-enabled'"),
            ("$3", "('bench-sub-' || :s)"),  // the subs siwa's notifications use (IngestBench.sub)
            ("$4", "(:ms)"),
            ("$5", "'com.example.siwa.bench'"),
            ("$6", "now()"),
            // What siwa stores for the bench's notifications (AppleNotification.inboxClaimsJSON).
            ("$7", #"'{"exp":1800086400,"events":{"email":"bench@privaterelay.appleid.com"}}'"#),
            ("$8", "(CASE WHEN :e = 1 THEN 'true' ELSE 'false' END)"),
            ("$9", "'bench@privaterelay.appleid.com'"),
        ]
        let oneLine = PgbenchScript.oneLine(sql, substitutions: substitutions.map { ($0.0, "ARRAY[" + $0.1 + "]") })
        return """
            \\set n random(1, 2000000000)
            \\set s random(0, \(IngestBench.subRange - 1))
            \\set e random(0, 1)
            \\set ms random(1600000000000, 1800000000000)
            \(oneLine);

            """
    }

    /// Runs pgbench for `seconds` with `clients`; returns transactions per second.
    static func run(databaseURL: String, clients: Int, seconds: Int) async throws -> Double {
        try await Pgbench.run(script: script(), databaseURL: databaseURL, clients: clients, seconds: seconds)
    }
}

enum PgbenchScript {
    /// `sql` as one pgbench line: each `$n::` parameter replaced by a
    /// pgbench expression (longest names first, so $1 does not eat $10),
    /// `--` comments dropped, lines joined.
    static func oneLine(_ sql: String, substitutions: [(String, String)]) -> String {
        var sql = sql
        for (parameter, value) in substitutions.sorted(by: { $0.0.count > $1.0.count }) {
            sql = sql.replacingOccurrences(of: parameter + "::", with: value + "::")
        }
        return sql.split(separator: "\n")
            .map { line in (line.range(of: "--").map { line[..<$0.lowerBound] } ?? line[...]).trimmingCharacters(in: .whitespaces) }
            .joined(separator: " ")
    }
}

enum Pgbench {
    /// Runs `script` for `seconds` with `clients` (prepared statements);
    /// returns transactions per second. Any failed transaction is an error.
    static func run(script: String, databaseURL: String, clients: Int, seconds: Int) async throws -> Double {
        try await runCounting(script: script, databaseURL: databaseURL, clients: clients, length: .seconds(seconds)).tps
    }

    /// How long a run lasts: a time, or a number of scripts each client runs.
    enum Length {
        case seconds(Int)
        case transactionsPerClient(Int)

        var arguments: [String] {
            switch self {
            case .seconds(let seconds): ["-T", String(seconds)]
            case .transactionsPerClient(let count): ["-t", String(count)]
            }
        }
    }

    /// As `run`, with the number of transactions (script runs) done.
    static func runCounting(script: String, databaseURL: String, clients: Int, length: Length) async throws
        -> (tps: Double, transactions: Int) {
        let scriptFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-pgbench-\(getpid())-\(UUID().uuidString).sql")
        try script.write(to: scriptFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: scriptFile) }
        let output = try await Shell.run("pgbench", ["-n", "-M", "prepared", "-c", String(clients), "-j", "2"] + length.arguments
                                             + ["-f", scriptFile.path, databaseURL])
        // "tps = 4567.123456 (without initial connection time)"
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
              let value = Double(line.dropFirst(6).prefix { $0 != " " }) else {
            throw BenchError("pgbench printed no tps:\n\(output)")
        }
        let failed = output.split(separator: "\n").first { $0.contains("number of failed transactions") } ?? ""
        if !failed.isEmpty, !failed.contains(": 0 ") { throw BenchError("pgbench had failures: \(failed)") }
        // "number of transactions actually processed: 12345"
        let processed = output.split(separator: "\n").first { $0.hasPrefix("number of transactions actually processed: ") }
        let transactions = processed.flatMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces).prefix { $0 != "/" } ?? "") }
        let planned = switch length {
        case .seconds(let seconds): Int(value * Double(seconds))
        case .transactionsPerClient(let count): count * clients
        }
        return (value, transactions ?? planned)
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum Shell {
    /// Run a program from PATH to completion; returns stdout+stderr. Past
    /// `limit` (a hung database, a wrk that never ends) the program is
    /// killed and the bench fails with its output, rather than hang.
    static func run(_ program: String, _ arguments: [String],
                    environment: [String: String] = ProcessInfo.processInfo.environment,
                    limit: Duration = .seconds(900)) async throws -> String {
        let (status, text) = try await ChildProcess.run(program, arguments, environment: environment, limit: limit)
        guard let status else { throw BenchError("\(program) did not finish within \(limit); killed:\n\(text)") }
        guard status == 0 else { throw BenchError("\(program) failed (status \(status)):\n\(text)") }
        return text
    }
}
