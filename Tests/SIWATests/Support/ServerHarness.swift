import SIWAConfiguration
import AccountStore
import AppleSimulator
import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import SIWAServer
import ServiceLifecycle

/// quiet logs for the whole test process
let quietLogging: Void = {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = ProcessInfo.processInfo.environment["SIWA_TEST_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) } ?? .critical
        return handler
    }
}()

/// siwa serve, in-process, on a free loopback port, against its own fresh
/// database and an Apple simulator: real HTTP, real PostgreSQL, real RSA.
final class ServerHarness: Sendable {
    static let clientID = "com.example.siwa.tests"

    let simulator: AppleSimulator
    let appleServer: RunningServer
    let database: TestDatabase
    let port: Int
    /// The admin listener's port, when the settings turn it on
    /// (`SIWA_ADMIN_HTTP_PORT`; off unless a test sets it, e.g. to 0: a
    /// port from TestPorts).
    let adminPort: Int?
    /// The API listener's port (`/v1`), when sign-in is on: a port from
    /// TestPorts, as the public one's, unless the test sets
    /// `SIWA_API_HTTP_PORT` (`off`: none).
    let apiPort: Int?
    /// The metrics listener's port (`/metrics`): a port from TestPorts
    /// unless the test sets `SIWA_METRICS_HTTP_PORT` (`off`: none).
    let metricsPort: Int?
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    private init(simulator: AppleSimulator, appleServer: RunningServer, database: TestDatabase, port: Int, adminPort: Int?,
                 apiPort: Int?, metricsPort: Int?, group: ServiceGroup, task: Task<Void, any Error>) {
        self.simulator = simulator
        self.appleServer = appleServer
        self.database = database
        self.port = port
        self.adminPort = adminPort
        self.apiPort = apiPort
        self.metricsPort = metricsPort
        self.group = group
        self.task = task
    }

    /// - Parameter waitUntilReady: wait for /readyz (database and Apple's keys); false for a server whose keys cannot load.
    /// - Parameter signIn: turn sign-in on (`SignInFixture.files()`: a team
    ///   key, registered with the simulator here, and a key ring).
    /// - Parameter adjust: changes the settings after they are read.
    /// - Parameter simulator: Apple, set up before siwa starts (its key set, say); a new one when nil.
    static func start(database: TestDatabase? = nil, settings extra: [String: String] = [:],
                      signIn: SimulatedTeamKeyFiles? = nil, waitUntilReady: Bool = true, simulator: AppleSimulator? = nil,
                      adjust: (inout ServerSettings) -> Void = { _ in }) async throws -> ServerHarness {
        _ = quietLogging
        let simulator = try simulator ?? AppleSimulator()
        let appleServer = try await TestPorts.serve { try await simulator.start(port: $0) }
        let database = if let database { database } else { try await TestDatabase.create() }
        // Its ports below the ephemeral range (TestPorts): the public, API
        // and metrics listeners' unless the test names them, the admin listener's
        // when the test turns it on with 0 ("any port").
        let harness = try await TestPorts.retryingWhileInUse { () async throws -> ServerHarness in
            var ports: [String: String] = [:]
            for key in ["SIWA_HTTP_PORT", "SIWA_ADMIN_HTTP_PORT", "SIWA_API_HTTP_PORT", "SIWA_METRICS_HTTP_PORT"]
            where extra[key] == "0" || (key != "SIWA_ADMIN_HTTP_PORT" && extra[key] == nil) {
                ports[key] = String(try TestPorts.free())
            }
            var settings = try Self.settings(database: database, simulator: simulator, appleBaseURL: appleServer.baseURL,
                                             signIn: signIn, extra: extra.merging(ports) { $1 })
            // What no SIWA_* setting reaches (e.g. the key cache's heartbeat).
            adjust(&settings)
            let port = OneShot<Int>(), adminPort = OneShot<Int>(), apiPort = OneShot<Int>(), metricsPort = OneShot<Int>()
            let app = try ServerAssembly.makeApplication(
                settings: settings,
                migrations: try Migrator(directory: TestEnvironment.repositoryRoot.appendingPathComponent("sql")),
                logger: Logger(label: "siwa.test-server"),
                onServerRunning: { bound in port.complete(.success(bound)) },
                onAdminRunning: { bound in adminPort.complete(.success(bound)) },
                onAPIRunning: { bound in apiPort.complete(.success(bound)) },
                onMetricsRunning: { bound in metricsPort.complete(.success(bound)) }
            )
            let group = ServiceGroup(services: [app], gracefulShutdownSignals: [], logger: Logger(label: "test"))
            // A listener that cannot bind (its port taken) ends the group
            // at once: its error is the caller's, not a wait for a port.
            let task = Task {
                do { try await group.run() } catch {
                    port.complete(.failure(error))
                    adminPort.complete(.failure(error))
                    apiPort.complete(.failure(error))
                    metricsPort.complete(.failure(error))
                    throw error
                }
                port.complete(.failure(TestSetupError("siwa serve stopped before it listened")))
                adminPort.complete(.failure(TestSetupError("siwa serve stopped before its admin listener listened")))
                apiPort.complete(.failure(TestSetupError("siwa serve stopped before its API listener listened")))
                metricsPort.complete(.failure(TestSetupError("siwa serve stopped before its metrics listener listened")))
            }
            return ServerHarness(simulator: simulator, appleServer: appleServer, database: database,
                                 port: try await port.wait(), adminPort: settings.admin == nil ? nil : try await adminPort.wait(),
                                 apiPort: settings.signIn == nil || settings.api == nil ? nil : try await apiPort.wait(),
                                 metricsPort: settings.metrics == nil ? nil : try await metricsPort.wait(),
                                 group: group, task: task)
        }
        harness.registerListeners()
        if waitUntilReady { try await harness.waitUntilKeysLoaded() }
        return harness
    }

    /// `siwa serve`'s settings for a test: its database, the simulator as
    /// Apple, the test client id; `extra` last.
    static func settings(database: TestDatabase, simulator: AppleSimulator, appleBaseURL: String,
                         signIn: SimulatedTeamKeyFiles? = nil, extra: [String: String] = [:]) throws -> ServerSettings {
        var values = [
            "SIWA_DATABASE_URL": database.serveURL,
            "SIWA_HTTP_PORT": "0",
            "SIWA_ADMIN_HTTP_PORT": "off",
            // `start` gives it a port from TestPorts; a test that builds the
            // application itself (RouteTests) binds no listener at all.
            "SIWA_METRICS_HTTP_PORT": "off",
            "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": clientID,
            "SIWA_APPLE_JWKS_URL": appleBaseURL + "/auth/keys",
        ]
        if let signIn {
            signIn.register(with: simulator)
            values.merge(SignInFixture.settings(signIn, appleBaseURL: appleBaseURL)) { $1 }
        }
        values.merge(extra) { $1 }
        return try ServerSettings(environment: SettingsReader(values))
    }

    /// Its listeners' answers are kept for the contract check (ContractRecorder).
    private func registerListeners() {
        ContractRecorder.register(port: port, as: .public)
        if let apiPort { ContractRecorder.register(port: apiPort, as: .api) }
        if let adminPort { ContractRecorder.register(port: adminPort, as: .admin) }
        if let metricsPort { ContractRecorder.register(port: metricsPort, as: .metrics) }
    }

    /// A graceful shutdown, as production's SIGTERM does. Not a cancel: a
    /// connection accepted just as the serving task is cancelled is never
    /// handed to Hummingbird, and NIO traps on its unfinished writer
    /// ("Deinited NIOAsyncWriter without calling finish()", swift-nio#3481),
    /// which crashed the whole test process. Cancelled only if the graceful
    /// shutdown has not ended after 30 s.
    func stop() async {
        ContractRecorder.unregister(ports: [port, apiPort, adminPort, metricsPort].compactMap { $0 })
        await group.triggerGracefulShutdown()
        let task = self.task
        let deadline = Task {
            try await Task.sleep(for: .seconds(30))
            task.cancel()
        }
        _ = try? await task.value
        deadline.cancel()
        await appleServer.stop()
    }

    /// The public listener: Apple's notifications, health, the receipts' key set.
    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// The metrics listener: `/metrics` (and health).
    var metricsURL: String {
        guard let metricsPort else { preconditionFailure("no metrics listener: SIWA_METRICS_HTTP_PORT=off") }
        return "http://127.0.0.1:\(metricsPort)"
    }

    /// GET /metrics on the metrics listener.
    func getMetrics() async throws -> HTTPAnswer {
        try await HTTPAnswer.send(method: .GET, url: metricsURL + "/metrics", body: nil, headers: [])
    }

    /// The API listener, where `/v1` is (sign-in on only).
    var apiURL: String {
        guard let apiPort else { preconditionFailure("no API listener: sign-in is off, or SIWA_API_HTTP_PORT=off") }
        return "http://127.0.0.1:\(apiPort)"
    }

    /// POST a raw body to /apple/notifications.
    func post(body: Data, headers: [(String, String)] = [("Content-Type", "application/json")]) async throws -> HTTPAnswer {
        try await HTTPAnswer.send(method: .POST, url: baseURL + "/apple/notifications", body: body, headers: headers)
    }

    /// POST a token the way Apple does: {"payload": "<JWS>"}.
    func post(token: String) async throws -> HTTPAnswer {
        try await post(body: AppleSimulator.body(for: token))
    }

    func get(_ path: String) async throws -> HTTPAnswer {
        try await HTTPAnswer.send(method: .GET, url: baseURL + path, body: nil, headers: [])
    }

    /// A notification signed by the simulator for the test client id.
    func notification(_ type: String, sub: String, jti: String = UUID().uuidString, eventTime: Date = Date(),
                      email: String? = nil) throws -> String {
        try simulator.notification(type: type, sub: sub, audience: Self.clientID, jti: jti, eventTime: eventTime,
                                   email: email, isPrivateEmail: email.map { _ in true })
    }

    private func waitUntilKeysLoaded() async throws {
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline {
            if let ready = try? await get("/readyz"), ready.status == 200 { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestSetupError("siwa did not become ready")
    }
}

struct HTTPAnswer: Sendable {
    let status: Int
    let body: Data
    var headers: HTTPHeaders = [:]

    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
    var reason: String? { json["error"] as? String }
    var text: String { String(decoding: body, as: UTF8.self) }

    static func send(method: HTTPMethod, url: String, body: Data?, headers: [(String, String)],
                     timeout: TimeAmount = .seconds(30)) async throws -> HTTPAnswer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await HTTPClient.shared.execute(request, timeout: timeout)
        let data = try await response.body.collect(upTo: 4 * 1024 * 1024)
        let answer = HTTPAnswer(status: Int(response.status.code), body: Data(data.readableBytesView), headers: response.headers)
        // For the contract check at the end of `make test` (docs/openapi.yaml):
        // each hop of a followed redirect (a 303 has no body), then the answer.
        for (index, hop) in response.history.enumerated() where index < response.history.count - 1 {
            ContractRecorder.answer(method: hop.request.method.rawValue, url: hop.request.url, status: Int(hop.responseHead.status.code),
                                    contentType: hop.responseHead.headers.first(name: "content-type"), body: Data())
        }
        let last = response.history.last?.request
        ContractRecorder.answer(method: last?.method.rawValue ?? method.rawValue, url: last?.url ?? url, status: answer.status,
                                contentType: response.headers.first(name: "content-type"), body: answer.body)
        return answer
    }
}
