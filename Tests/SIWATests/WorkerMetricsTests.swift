import AccountLifecycle
import AppleSimulator
import Foundation
import SIWAConfiguration
import SIWAWorker
import Testing

/// What an operator scrapes from `siwa worker` (its own listener:
/// /healthz, /readyz, /metrics) after real jobs ran in a real worker
/// process, and what its log lines look like under systemd.
@Suite("Worker metrics", .testDatabases, .timeLimit(.minutes(10)))
struct WorkerMetricsTests {
    /// Jobs that complete after a failed webhook, one discarded, one rescued
    /// from a dead worker's expired lease: each counted by kind, each step
    /// timed, each webhook failure counted by its status class. The worker
    /// writes its lines with journald's priority prefix.
    @Test func countsWhatTheJobsDid() async throws {
        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        // Every job's first webhook is answered 500: each job is retried once.
        harness.downstream.set(.failFirst(1))
        try await harness.enqueue(subs: ["m.1", "m.2", "m.3"])
        try await harness.database.execute("""
            INSERT INTO siwa.jobs (kind, args) VALUES ('purge_user', '{}');
            INSERT INTO siwa.users (apple_sub, email, apple_team) VALUES ('m.rescued', 'm.rescued@privaterelay.appleid.com', 'TEAM123456');
            INSERT INTO siwa.jobs (kind, args, state, attempt, attempted_at, locked_by, locked_until)
                VALUES ('purge_user', '{"apple_sub": "m.rescued", "apple_team": "TEAM123456"}', 'running', 1, now() - interval '1 minute',
                        'dead-worker', now() - interval '10 seconds');
            """)
        let port = try freePort()
        let worker = try harness.startWorker(["SIWA_WORKER_METRICS_PORT": String(port)], journal: true)
        let base = "http://127.0.0.1:\(port)"
        let settled = try await harness.wait {
            guard try await harness.count(state: "completed") == 4 else { return false }
            return try await harness.count(state: "discarded") == 1
        }
        #expect(settled, "\(worker.log.suffix(3000))")

        let health = try await HTTPAnswer.send(method: .GET, url: base + "/healthz", body: nil, headers: [])
        #expect(health.status == 200)
        let ready = try await HTTPAnswer.send(method: .GET, url: base + "/readyz", body: nil, headers: [])
        #expect(ready.status == 200)
        #expect(String(decoding: ready.body, as: UTF8.self) == #"{"status":"ready","database":"ok"}"#)

        let kind = ["kind": "purge_user"]
        // The last completion is counted just after its commit.
        #expect(try await eventually(upTo: .seconds(5)) {
            try await PrometheusText.scrape(base).value("siwa_worker_jobs_completed_total", kind) == 4
        })
        let metrics = try await PrometheusText.scrape(base)
        #expect(metrics.value("siwa_worker_jobs_completed_total", kind) == 4, "\(metrics.text)")
        #expect(metrics.value("siwa_worker_jobs_retried_total", kind) == 4)
        #expect(metrics.value("siwa_worker_jobs_discarded_total", kind) == 1)
        #expect(metrics.value("siwa_worker_jobs_rescued_total", kind) == 1)
        #expect(metrics.value("siwa_build_info", ["version": SIWAVersion.version, "commit": SIWAVersion.commit]) == 1,
                "the worker says which build it is, as serve does")
        // Five first attempts and four second ones.
        #expect(metrics.value("siwa_worker_jobs_claimed_total", kind) == 9)
        #expect(metrics.value("siwa_worker_webhook_failures_total", ["step": WorkerHarness.httpStep, "status_class": "5xx"]) == 4)
        let webhookStep = ["step": WorkerHarness.httpStep]
        #expect(metrics.value("siwa_worker_step_duration_seconds_count", webhookStep.merging(["outcome": "failed"]) { $1 }) == 4)
        #expect(metrics.value("siwa_worker_step_duration_seconds_count", webhookStep.merging(["outcome": "completed"]) { $1 }) == 4)
        #expect(metrics.value("siwa_worker_step_duration_seconds_count", ["step": WorkerHarness.sqlStep, "outcome": "completed"]) == 4)
        #expect((metrics.value("siwa_worker_step_duration_seconds_count", ["step": "siwa.erase_personal_data", "outcome": "completed"]) ?? 0) >= 1)
        #expect(metrics.value("siwa_worker_lease_renewals_lost_total") == 0)
        #expect(metrics.value("siwa_jobs_oldest_running_seconds") == 0)
        #expect(metrics.value("siwa_database_reachable") == 1)
        // The leading worker walked the audit chain when it took the lead:
        // its verified head, and no break.
        #expect(metrics.value("siwa_audit_chain_broken") == 0, "\(metrics.text)")
        #expect(metrics.value("siwa_audit_chain_verified_seq") != nil)
        #expect(metrics.value("siwa_maintenance_failures_total", ["task": "audit_verifier"]) == 0)
        // The process's own figures, from /proc.
        #expect((metrics.value("process_open_fds") ?? 0) > 3 && (metrics.value("process_resident_memory_bytes") ?? 0) > 1_000_000)
        #expect((metrics.value("process_cpu_seconds_total") ?? 0) > 0 && (metrics.value("process_max_fds") ?? 0) >= 1024)
        // The CPU time is a counter, as Prometheus's client libraries type it.
        #expect(metrics.text.contains("# TYPE process_cpu_seconds_total counter"), "\(metrics.text)")
        #expect(metrics.text.contains("# TYPE process_open_fds gauge"))
        let started = metrics.value("process_start_time_seconds") ?? 0
        #expect(abs(started - Date().timeIntervalSince1970) < 600, "\(started)")
        // Its listener's answers carry a request id too.
        #expect(health.headers.first(name: "X-Request-Id")?.isEmpty == false)

        #expect(await worker.terminate() == 0)
        // Under systemd: every line starts with its syslog priority.
        let lines = worker.log.split(separator: "\n")
        #expect(!lines.isEmpty)
        for line in lines { #expect(line.wholeMatch(of: /<[2-7]>ts=\d{4}-.*/) != nil, "\(line)") }
        #expect(lines.contains { $0.hasPrefix("<6>") && $0.contains("Worker started") })
        #expect(lines.contains { $0.hasPrefix("<4>") && $0.contains("Job failed; will retry") })
        #expect(lines.contains { $0.hasPrefix("<3>") && $0.contains("Job discarded") })
        #expect(lines.contains { $0.hasPrefix("<6>") && $0.contains("Metrics listener") && $0.contains("127.0.0.1:\(port)") })
    }

    /// The leading worker walks the audit chain when it takes the lead: a
    /// sound chain is `siwa_audit_chain_broken` 0 with its verified head; a
    /// sealed row edited by a superuser is 1, and a line at critical.
    @Test func aBrokenAuditChainShowsOnTheLeadersMetrics() async throws {
        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        try await harness.enqueue(subs: ["chain.m.1", "chain.m.2"])
        let port = try freePort()
        let base = "http://127.0.0.1:\(port)"
        let unsealed = "SELECT count(*) FROM siwa.audit_log WHERE seq > (SELECT coalesce(max(seq), 0) FROM siwa.audit_chain)"
        let first = try harness.startWorker(["SIWA_WORKER_METRICS_PORT": String(port)])
        #expect(try await harness.wait { try await harness.count(state: "completed") == 2 }, "\(first.log.suffix(2000))")
        #expect(try await harness.wait { try await harness.database.scalar(unsealed) == 0 }, "\(first.log.suffix(2000))")
        let sound = try await PrometheusText.scrape(base)
        #expect(sound.value("siwa_audit_chain_broken") == 0, "\(sound.text)")
        #expect(sound.value("siwa_audit_chain_verified_seq") != nil)
        #expect(await first.terminate() == 0)

        let edited = try await harness.database.scalar("SELECT min(seq) FROM siwa.audit_chain")
        try await AuditChainTests.asSuperuser(harness.database) {
            try await AuditChainTests.run($0, "UPDATE siwa.audit_log SET actor = 'someone else' WHERE seq = \(edited)")
        }
        let second = try harness.startWorker(["SIWA_WORKER_METRICS_PORT": String(port), "SIWA_LOG_FORMAT": "json"])
        try atTestEnd { await second.kill9() }
        #expect(try await harness.wait(upTo: .seconds(30)) {
            (try? await PrometheusText.scrape(base))?.value("siwa_audit_chain_broken") == 1
        }, "\(second.log.suffix(2000))")
        let broken = try await PrometheusText.scrape(base)
        // Its verified head stops below the edited row.
        #expect((broken.value("siwa_audit_chain_verified_seq") ?? -1) < Double(edited), "\(broken.text)")
        try await second.waitForLog("The audit chain is broken")
        #expect(second.log.contains(#""level":"critical""#) && second.log.contains("\"seq\":\"\(edited)\""), "\(second.log.suffix(2000))")
    }

    /// A job running now shows as the oldest running job's age; a lease
    /// taken away while it runs is counted when the heartbeat finds out.
    @Test func showsTheOldestRunningJobAndLostLeases() async throws {
        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        harness.downstream.set(delay: .seconds(4))
        try await harness.enqueue(subs: ["lost.1"])
        let port = try freePort()
        let worker = try harness.startWorker(["SIWA_WORKER_METRICS_PORT": String(port)])
        let base = "http://127.0.0.1:\(port)"
        // The webhook is in flight (its answer 4 s away).
        try await harness.wait(upTo: .seconds(30)) { harness.downstream.deliveries.count == 1 }
        // The running job shows with its age once it is half a second old.
        #expect(try await harness.wait(upTo: .seconds(3)) {
            (try? await PrometheusText.scrape(base))?.value("siwa_jobs_oldest_running_seconds") ?? 0 >= 0.5
        }, "\(worker.log.suffix(2000))")
        // Another worker took the job (as after a rescue during an outage).
        try await harness.database.execute("UPDATE siwa.jobs SET locked_by = 'another-worker' WHERE state = 'running'")
        let counted = try await harness.wait(upTo: .seconds(10)) {
            try await PrometheusText.scrape(base).value("siwa_worker_lease_renewals_lost_total") == 1
        }
        #expect(counted, "\(worker.log.suffix(2000))")
        #expect(await worker.terminate() == 0)
    }

    /// The listener is off with `off`, and then the worker says so.
    @Test func theListenerCanBeTurnedOff() async throws {
        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        let worker = try harness.startWorker(["SIWA_WORKER_METRICS_PORT": "off"])
        try await worker.waitForLog("Worker started")
        #expect(worker.log.contains("The metrics listener is off (SIWA_WORKER_METRICS_PORT=off)"))
        #expect(await worker.terminate() == 0)
    }

    /// Every series deploy/prometheus/alerts.yml names is one that a real
    /// `siwa serve` or `siwa worker` exports (a renamed metric would leave
    /// an alert that never fires).
    @Test func theAlertRulesNameRealSeries() async throws {
        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        harness.downstream.set(.failFirst(1))
        try await harness.enqueue(subs: ["alerts.1"])
        let workerPort = try freePort()
        let worker = try harness.startWorker(["SIWA_WORKER_METRICS_PORT": String(workerPort)])
        let apple = try AppleSimulator()
        let appleServer = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await appleServer.stop() }
        let serve = try await SIWAProcess.serve(environment: [
            "SIWA_DATABASE_URL": harness.database.serveURL, "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
            "SIWA_APPLE_JWKS_URL": appleServer.baseURL + "/auth/keys",
        ])
        try await harness.wait { try await harness.count(state: "completed") == 1 }
        let exported = try await PrometheusText.scrape("http://127.0.0.1:\(serve.metricsPort)").names
            .union(PrometheusText.scrape("http://127.0.0.1:\(workerPort)").names)

        let rules = try String(contentsOf: TestEnvironment.repositoryRoot.appendingPathComponent("deploy/prometheus/alerts.yml"), encoding: .utf8)
        let expressions = rules.split(separator: "\n").filter { line in
            let text = line.trimmingCharacters(in: .whitespaces)
            return !text.hasPrefix("#") && !text.hasPrefix("summary:") && !text.hasPrefix("description:")
        }.joined(separator: "\n")
        let named = Set(expressions.matches(of: /siwa_[a-z_]+/).map { String($0.output) })
        #expect(named.count >= 8, "\(named)")
        #expect(named.subtracting(exported).isEmpty, "alert rules name series nobody exports: \(named.subtracting(exported).sorted())")
        // Each kind the rules name is one of siwa's (JobKinds), and each of
        // siwa's kinds has a rule on its discarded jobs.
        let kinds = Set(expressions.matches(of: /kind="([a-z_]+)"/).map { String($0.output.1) })
        #expect(kinds == Set(JobKinds.names), "alert rules' kinds \(kinds.sorted()), JobKinds \(JobKinds.names)")
        #expect(await worker.terminate() == 0)
        #expect(await serve.terminate() == 0)
    }

    @Test func theListenerSettingIsOffAZeroOrAPort() throws {
        let base = ["SIWA_DATABASE_URL": "postgres://u@h/d"]
        #expect(try WorkerSettings(environment: SettingsReader(base)).metricsListener == ListenerAddress(host: "127.0.0.1", port: 9091))
        for off in ["off", "OFF"] {
            #expect(try WorkerSettings(environment: SettingsReader(base.merging(["SIWA_WORKER_METRICS_PORT": off]) { $1 })).metricsListener == nil)
        }
        #expect(try WorkerSettings(environment: SettingsReader(base.merging(["SIWA_WORKER_METRICS_PORT": "0"]) { $1 })).metricsListener?.port == 0)
        #expect {
            try WorkerSettings(environment: SettingsReader(base.merging(["SIWA_WORKER_METRICS_PORT": "ninety"]) { $1 }))
        } throws: { error in
            "\(error)" == "SIWA_WORKER_METRICS_PORT: expected off or a whole number in 0...65535, got 'ninety'"
        }
    }
}
