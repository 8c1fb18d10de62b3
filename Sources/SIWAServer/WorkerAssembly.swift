import AccountEvents
import AccountStore
import AsyncHTTPClient
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// Wires `siwa worker` from its settings: the Postgres client(s), the purge
/// plan, the webhook client and the job worker, as services for one
/// ServiceGroup (SIGTERM: the worker drains, then the clients stop).
public struct WorkerAssembly: Sendable {
    public let services: [any Service]
    public let plan: PurgePlan

    /// Throws `PurgePlanError` (bad plan), `SettingError`, `DatabaseConfigurationError`.
    public init(settings: WorkerSettings, environment: [String: String], migrations: Migrator?,
                workerName: String = WorkerAssembly.defaultWorkerName(), logger: Logger) throws {
        let database = try DatabaseConfiguration(url: settings.databaseURL, maximumConnections: settings.databaseMaxConnections)
        let client = PostgresClient(configuration: database.postgresClientConfiguration,
                                    backgroundLogger: Logger(label: "siwa.postgres"))
        let plan: PurgePlan
        if let path = settings.purgePlanPath {
            do {
                plan = try PurgePlan.load(path: path, environment: environment)
            } catch let error as PurgePlanError {
                throw SettingError("SIWA_PURGE_PLAN", "\(path): \(error)")
            }
        } else {
            plan = .builtInOnly
        }
        var external: [String: PostgresClient] = [:]
        for step in plan.steps {
            guard case .sql(_, let other?) = step.action else { continue }
            external[step.name] = PostgresClient(configuration: other.configuration.postgresClientConfiguration,
                                                 backgroundLogger: Logger(label: "siwa.postgres.\(step.name)"))
        }
        // Webhooks: only a 2xx from the URL in the plan counts, so redirects
        // are not followed.
        var http = HTTPClient.Configuration()
        http.redirectConfiguration = .disallow
        let webhookClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: http)
        let queue = JobQueue(client: client, worker: workerName, logger: Logger(label: "siwa.jobs"))
        let runner = PurgeJobRunner(plan: plan, queue: queue, externalDatabases: external,
                                    webhooks: WebhookDelivery(http: webhookClient), logger: Logger(label: "siwa.purge"))
        let worker = JobWorker(client: client, queue: queue, runner: runner, options: settings.worker, logger: logger) {
            logger.info("Database", metadata: ["database": "\(database.redactedDescription)", "tls": "\(database.tlsDescription)"])
            // Refuse to work against a schema that is behind or was edited.
            if let migrations { try await migrations.checkUpToDate(client: client, logger: logger) }
            try await RuntimeRole.warnIfPrivileged(client: client, logger: logger)
        }
        self.plan = plan
        self.services = [client, HTTPClientService(client: webhookClient)] + external.values.map { $0 as any Service } + [worker]
    }

    /// host:pid, unique among live workers, readable in `locked_by`.
    public static func defaultWorkerName() -> String {
        "\(ProcessInfo.processInfo.hostName):\(getpid())"
    }

    /// One line for the start-up log.
    public static func describe(_ plan: PurgePlan) -> String {
        guard let source = plan.source, !plan.steps.isEmpty else {
            return "no SIWA_PURGE_PLAN: only the built-in step runs (\(PurgePlan.builtInStepName)); the app's own data is not touched"
        }
        return "\(source): \(plan.allStepNames.joined(separator: " -> "))"
    }
}

/// Shuts an HTTP client down when its service group stops (after the
/// worker, which is later in the list and so stops first).
struct HTTPClientService: Service {
    let client: HTTPClient

    func run() async throws {
        try? await gracefulShutdown()
        try await client.shutdown()
    }
}
