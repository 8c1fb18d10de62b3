import Foundation
import Testing

/// `make bench` still runs after a change of the schema or of a statement:
/// its yardsticks are SQL of their own (the pgbench ceiling binds siwa's
/// record statement by hand, the plain version and the plain sign-in have
/// their own statements, the worker's ceiling binds the claim), which no
/// other test runs, and a migration once broke them unseen until the next
/// benchmark. Here every part of siwa-bench (the debug build) runs once at
/// a tiny size on the test cluster: each statement, process and check of
/// the real benchmark, none of its figures. Needs wrk and pgbench (make
/// test installs wrk; pgbench comes with PostgreSQL's server package).
@Suite("Bench smoke", .timeLimit(.minutes(10)))
struct BenchSmokeTests {
    @Test func everyPartOfTheBenchmarkRunsAtATinySize() async throws {
        let bench = try TestEnvironment.builtBinary("siwa-bench")
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SIWA_") && !$0.key.hasPrefix("BENCH_") }
        environment.merge([
            "SIWA_BENCH_SERVER_URL": try TestEnvironment.databaseURL,
            "BENCH_ROUNDS": "1", "BENCH_WARMUP": "50", "BENCH_NOTIFICATIONS": "200", "BENCH_CONCURRENCY": "4",
            "BENCH_PGBENCH_SECONDS": "1", "BENCH_OFFERED_RATE": "50", "BENCH_OPEN_LOOP_SECONDS": "1",
            "BENCH_PRELOAD_USERS": "2000", "BENCH_JOBS": "3000", "BENCH_WORKER_CONCURRENCY": "4", "BENCH_PGBENCH_JOB_CLIENTS": "2",
            "BENCH_WAKE_SAMPLES": "3", "BENCH_SIGNINS": "40", "BENCH_STORE_SIGNINS": "40", "BENCH_SIGNIN_NOTIFICATIONS": "40",
            "BENCH_SIGNIN_WARMUP": "10", "BENCH_VALIDATIONS": "20", "BENCH_VALIDATION_CAP_SECONDS": "1", "BENCH_DELIVERIES": "40",
            "SIWA_LOG_LEVEL": "warning",
        ]) { $1 }
        let run = try await runToCompletion(bench.path, [], environment: environment)
        let output = run.output
        #expect(run.status == 0, "siwa-bench exited \(run.status):\n\(output.suffix(4000))")
        // Each part reached its summary, with the plain version beside siwa.
        for heading in ["== siwa ingest benchmark", "== per notification, siwa against the plain five-statement version",
                        "== the admin's lookup by email address on the million database", "== siwa worker benchmark",
                        "plain claim+complete", "== sign-in store: batched", "== siwa sign-in benchmark",
                        "== app events webhook: its cost to the ingest", "== app events webhook: deliveries"] {
            #expect(output.contains(heading), "no '\(heading)' in:\n\(output.suffix(4000))")
        }
        // Every notification answered 200 was recorded, in each scenario.
        let recorded = output.split(separator: "\n").filter { $0.hasPrefix("fresh ") || $0.hasPrefix("analyzed ") || $0.hasPrefix("million ") }
            .filter { $0.contains(" of ") && $0.contains("failed") }
        #expect(recorded.count == 3, "\(recorded)")
        for line in recorded {
            let tail = line.split(separator: " ").suffix(3).map(String.init)  // "N", "of", "M"
            #expect(tail.count == 3 && tail[0] == tail[2], "\(line)")
        }
    }
}
