import AppleSimulator
import Foundation
import Hummingbird
import Logging
import Testing

/// With OTEL_EXPORTER_OTLP_ENDPOINT set, real `siwa serve` and `siwa
/// worker` processes export their spans over OTLP/HTTP: here to a receiver
/// on loopback that keeps what it is sent (protobuf, whose strings are
/// plain UTF-8 in the bytes, so the span and service names can be found
/// without decoding it).
@Suite("Tracing", .testDatabases, .timeLimit(.minutes(10)))
struct TracingTests {
    @Test func spansOfTheNotificationPathAndTheJobStepsReachAnOTLPReceiver() async throws {
        let received = Locked<[Data]>([])
        let router = Router(context: BasicRequestContext.self)
        router.post("/v1/traces") { request, _ in
            let body = try await request.body.collect(upTo: 16 * 1024 * 1024)
            received.withLock { $0.append(Data(body.readableBytesView)) }
            return Response(status: .ok, headers: [.contentType: "application/x-protobuf"])
        }
        let collector = try await TestPorts.serve { try await RunningServer.start(router: router, port: $0, logger: Logger(label: "otlp-receiver")) }
        try atTestEnd { await collector.stop() }
        let tracing = ["OTEL_EXPORTER_OTLP_ENDPOINT": collector.baseURL, "OTEL_BSP_SCHEDULE_DELAY": "200"]
        func exported(_ text: String) -> Bool {
            received.withLock { bodies in bodies.contains { $0.range(of: Data(text.utf8)) != nil } }
        }

        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        let apple = try AppleSimulator()
        let appleServer = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await appleServer.stop() }
        let serve = try await SIWAProcess.serve(environment: tracing.merging([
            "SIWA_DATABASE_URL": harness.database.serveURL, "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
            "SIWA_APPLE_JWKS_URL": appleServer.baseURL + "/auth/keys",
        ]) { $1 })
        let token = try apple.notification(type: "account-delete", sub: "traced.sub", audience: ServerHarness.clientID)
        let answer = try await HTTPAnswer.send(method: .POST, url: "http://127.0.0.1:\(serve.port)/apple/notifications",
                                               body: AppleSimulator.body(for: token),
                                               headers: [("Content-Type", "application/json"), ("X-Request-Id", "traced-req-0042")])
        #expect(answer.status == 200)
        #expect(serve.log.contains("Tracing on"), "\(serve.log.suffix(2000))")
        // The request's log lines name its trace and span (logfmt: key=value).
        let requestLines = serve.log.split(separator: "\n").filter { $0.contains("request_id=traced-req-0042") }
        #expect(!requestLines.isEmpty && requestLines.allSatisfy { $0.contains(" trace_id=") && $0.contains(" span_id=") },
                "\(serve.log.suffix(2000))")
        #expect(await serve.terminate() == 0)
        #expect(try await eventually(upTo: .seconds(10)) { exported("siwa.notification.record") }, "\(serve.log.suffix(2000))")
        // The spans carry the request's id (siwa.request_id), the caller's here.
        for name in ["siwa.notification.receive", "siwa.notification.verify", "siwa-serve", "siwa.request_id", "traced-req-0042",
                     "siwa.apple.keys"] {
            #expect(exported(name), "\(name) was not exported")
        }

        // The purge that notification enqueued, run by a traced worker.
        let worker = try harness.startWorker(tracing)
        #expect(try await harness.wait(upTo: .seconds(30)) { try await harness.count(state: "completed") == 1 }, "\(worker.log.suffix(2000))")
        #expect(await worker.terminate() == 0)
        let jobLine = worker.log.split(separator: "\n").first { $0.contains("msg=\"Job completed\"") }
        #expect(jobLine?.contains(" trace_id=") == true && jobLine?.contains(" span_id=") == true,
                "the job's log line names no trace: \(worker.log.suffix(2000))")
        #expect(try await eventually(upTo: .seconds(10)) { exported("siwa.job.step") }, "\(worker.log.suffix(2000))")
        for name in ["siwa.job", "siwa-worker", WorkerHarness.sqlStep, WorkerHarness.httpStep] {
            #expect(exported(name), "\(name) was not exported")
        }
    }

    /// Without the endpoint no tracer is bootstrapped and nothing says otherwise.
    @Test func offWithoutAnEndpoint() async throws {
        let harness = try await WorkerHarness.start()
        try atTestEnd { await harness.stop() }
        let worker = try harness.startWorker()
        try await worker.waitForLog("Worker started")
        #expect(!worker.log.contains("Tracing on"))
        #expect(await worker.terminate() == 0)
    }
}
