import Foundation

/// The audit chain's side of an ingest scenario: `siwa worker` seals the
/// log while the load runs (as in production), then how long it took to
/// catch up once the load stopped, its CPU per audit row, and how long
/// `siwa audit verify` takes over the whole log.
struct AuditChainFigures {
    var rows = 0
    /// From the end of the load until every row was sealed.
    var catchUpSeconds = 0.0
    /// The worker's CPU over the whole scenario, per audit row.
    var workerMicrosPerRow = 0.0
    var verifySeconds = 0.0
    var verifyLine = ""

    static func measure(database: BenchDatabase, worker: WorkerProcess) async throws -> AuditChainFigures {
        var figures = AuditChainFigures()
        let start = ContinuousClock.now
        let deadline = start + .seconds(300)
        while try await database.scalar("""
            SELECT count(*) FROM siwa.audit_log AS l WHERE NOT EXISTS (SELECT FROM siwa.audit_chain AS c WHERE c.seq = l.seq)
            """) != "0" {
            guard ContinuousClock.now < deadline else { throw BenchError("the worker did not seal the audit log within 300 s") }
            try await Task.sleep(for: .milliseconds(100))
        }
        figures.catchUpSeconds = (ContinuousClock.now - start) / .seconds(1)
        figures.rows = Int(try await database.scalar("SELECT count(*) FROM siwa.audit_log")) ?? 0
        figures.workerMicrosPerRow = worker.cpuSeconds / Double(max(figures.rows, 1)) * 1e6
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SIWA_") }
        environment["SIWA_DATABASE_URL"] = database.ownerURL
        let verifyStart = ContinuousClock.now
        let output = try await Shell.run(try BenchDatabase.siwaBinary(), ["audit", "verify"], environment: environment)
        figures.verifySeconds = (ContinuousClock.now - verifyStart) / .seconds(1)
        figures.verifyLine = output.split(separator: "\n").last.map(String.init) ?? ""
        guard figures.verifyLine.hasPrefix("ok: \(figures.rows) rows") else { throw BenchError("siwa audit verify: \(output)") }
        return figures
    }
}
