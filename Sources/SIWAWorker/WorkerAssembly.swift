import AccountLifecycle
import AccountStore
import AsyncHTTPClient
import Foundation
import Logging
import Metrics
import PostgresNIO
import SIWAConfiguration
import ServiceLifecycle

/// Wires `siwa worker` from its settings: the Postgres client(s), the purge
/// plan, the webhook client and the job worker, as services for one
/// ServiceGroup (SIGTERM: the worker drains, then the clients stop).
public struct WorkerAssembly: Sendable {
    public let services: [any Service]
    public let plan: PurgePlan

    /// Throws `PurgePlanError` (bad plan), `SettingError`, `DatabaseConfigurationError`.
    /// - Parameter metrics: where the job counters, step histograms and token
    ///   validations are recorded (`siwa worker`: its /metrics registry).
    /// - Parameter onPrepared: called once the start-up checks passed (the
    ///   schema up to date, after waiting for `siwa migrate` when it is
    ///   behind), before the first claim: `siwa worker` tells systemd READY=1.
    public init(settings: WorkerSettings, environment: [String: String], migrations: Migrator?,
                migrationWait: MigrationWait = MigrationWait(),
                workerName: String = WorkerAssembly.defaultWorkerName(), metrics: any MetricsFactory = MetricsSystem.factory,
                logger: Logger, onPrepared: @escaping @Sendable () -> Void = {}) throws {
        // Everything that can refuse a setting first: past this point
        // HTTP clients exist, and each must be shut down, not dropped.
        let access = try settings.signIn.map { try AppleAccess($0, observer: AppleCallTelemetry(metrics: metrics)) }
        let receipts = try settings.receipts?.signer()
        let ledger: ErasureLedger
        do {
            ledger = try ErasureLedger.open(directory: settings.purge.ledgerDirectory, signer: try settings.receipts?.ledgerSigner(),
                                            processName: workerName)
        } catch let error as ErasureLedgerError {
            throw SettingError(SettingsCatalog.erasureLedgerDir.name, "\(error)")
        }
        var configuration = try settings.database.configuration()
        // No claim or step waits for ever on a stuck session's lock: see SessionLimits.runtime.
        configuration.sessionLimits = .runtime
        let database = configuration
        let client = PostgresClient(configuration: database.postgresClientConfiguration,
                                    backgroundLogger: Logger(label: "siwa.postgres"))
        let plan = try Self.loadPlan(settings: settings, environment: environment)
        let external = Self.externalClients(plan)
        let webhookClient = Self.webhookClient(concurrency: settings.worker.concurrency)
        // A purge's receipt and ledger line are written as it completes: its kind's completion hook.
        let queue = JobQueue(client: client, worker: workerName, logger: Logger(label: "siwa.jobs"),
                             completionHooks: PurgeCompletion.hooks(receipts: receipts, ledger: ledger))
        let revoker = access.map {
            TokenRevoker(apple: $0.apple, keyRing: $0.keyRing,
                         store: AppleTokenStore(client: client, queue: queue, logger: Logger(label: "siwa.tokens")),
                         logger: Logger(label: "siwa.tokens"))
        }
        let jobMetrics = JobMetrics(factory: metrics)
        let maintenanceMetrics = MaintenanceMetrics(factory: metrics)
        let hook = settings.appWebhook
        let appEvents = AppEventQueue(client: client, worker: workerName, logger: Logger(label: "siwa.app-events"))
        // One pacer for every call to Apple the worker paces (token
        // validation, an app transfer's jobs), both on the maintenance leader.
        let pacer = settings.tokenValidation.requestsPerSecond.map { Pacer(perSecond: $0) }
        let leadership = MaintenanceLeadership()
        var transfer: TransferRunnerResources?
        if let access, let signIn = settings.signIn {
            transfer = TransferRunnerResources(apple: access.apple, teamOfClient: { signIn.team(of: $0) }, pacer: pacer,
                                               leadership: leadership,
                                               store: TransferStore(client: client, logger: Logger(label: "siwa.transfer")))
        }
        // The job kinds this worker claims and runs, each with its runner (JobKinds).
        let runners = JobKinds.runners(JobKindResources(
            queue: queue, webhooks: WebhookDelivery(http: webhookClient), metrics: jobMetrics, plan: plan,
            externalDatabases: external, revoker: revoker, purgeRole: settings.purge.role,
            appEvents: appEvents, appWebhook: hook, transfer: transfer))
        var validation: [any Service] = []
        if let access, let hours = settings.tokenValidation.periodHours {
            validation = [TokenValidator(
                queue: TokenValidationQueue(client: client, periodHours: hours, logger: Logger(label: "siwa.tokens")),
                apple: access.apple, keyRing: access.keyRing,
                settings: settings.tokenValidation, logger: Logger(label: "siwa.tokens"),
                metrics: metrics, maintenance: maintenanceMetrics, pacer: pacer)]
        } else {
            // Validation is off: never paused (the alert's series exists all the same).
            Gauge(label: "siwa_validation_paused", factory: metrics).record(0)
        }
        let auditChain = AuditChainKeeper(sealer: AuditSealer(client: client, logger: Logger(label: "siwa.audit")),
                                          headSigner: receipts, headLogInterval: settings.maintenance.auditHeadLogInterval,
                                          metrics: maintenanceMetrics, logger: Logger(label: "siwa.audit"))
        let auditWatch = settings.maintenance.auditVerifyInterval.map { interval -> any Service in
            AuditChainWatch(verifier: AuditChainVerifier(client: client, logger: Logger(label: "siwa.audit")), interval: interval,
                            metrics: metrics, failures: maintenanceMetrics, logger: Logger(label: "siwa.audit"))
        }
        // The rescuer, the cleaner, the sealer, the pruning of refused
        // deliveries and of retried sign-in codes, and validation run on one
        // worker at a time, elected by a lock on a connection of its own.
        let rejections = RejectionPruner(
            retention: RejectionRetention(client: client, retentionDays: settings.maintenance.rejectionRetentionDays,
                                          logger: Logger(label: "siwa.rejections")),
            failures: maintenanceMetrics, logger: Logger(label: "siwa.rejections"))
        // Not the queue's: a maintenance service of its own (SignInCodePruner).
        let signInCodes = SignInCodes(client: client, logger: Logger(label: "siwa.sign-in")).pruner(logger: Logger(label: "siwa.sign-in"))
        let maintenance = JobWorker.Maintenance(lock: MaintenanceLock(database: database, logger: Logger(label: "siwa.maintenance")),
                                                duties: [auditChain as any Service, rejections, signInCodes] + (auditWatch.map { [$0] } ?? []) + validation,
                                                metrics: maintenanceMetrics, leadership: leadership)
        let worker = JobWorker(client: client, queue: queue, runners: runners, options: settings.worker, metrics: jobMetrics,
                               maintenance: maintenance, logger: logger) {
            logger.info("Database", metadata: ["database": "\(database.redactedDescription)", "tls": "\(database.tlsDescription)"])
            // Wait for a schema that is behind (an upgrade's migration not
            // yet applied); refuse one that is ahead or was edited.
            if let migrations {
                try await migrations.waitUntilUpToDate(client: client, logger: logger, wait: migrationWait) { pause in
                    try await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
                }
            }
            try await RuntimeRole.warnIfPrivileged(as: .worker, client: client, logger: logger)
            if plan.hasOwnDatabaseSQL { try await Self.checkPurgeRole(settings.purge.role, client: client, logger: logger) }
            for warning in access?.warnings ?? [] { logger.warning("\(warning)") }
            logger.info(access == nil ? "Sign-in settings absent: Apple tokens are neither validated nor revoked"
                                      : "Apple tokens: revoked before each purge; validation \(settings.tokenValidation.describe)")
            // Every process that records events reads the switch (sql/014).
            let wasOn = try await appEvents.setEnabled(hook != nil, includeEmail: hook?.includeEmail ?? false)
            if let hook {
                logger.info("App events webhook: every event is delivered, signed",
                            metadata: ["url": "\(hook.redactedURL)", "secrets": "\(hook.keys.count)",
                                       "include_email": "\(hook.includeEmail)"])
            } else {
                logger.log(level: wasOn ? .notice : .info,
                           "App events webhook is off: no event is enqueued for the app (set SIWA_APP_WEBHOOK_URL and SIWA_APP_WEBHOOK_SECRET to deliver them)")
            }
            if let signer = ledger.signer {
                logger.info("Erasure ledger: one signed line for each completed purge, synced before it commits",
                            metadata: ["file": "\(ledger.path)", "kid": "\(signer.keyID)"])
            } else {
                // A notice, as "Deletion receipts are off" is: a trial's
                // choice, said at every start, not a fault.
                logger.notice("Erasure ledger: lines are unsigned because deletion receipts are off; `siwa erasures reapply` takes them only with --accept-unsigned (set SIWA_RECEIPT_KEY_FILE and SIWA_RECEIPT_ISSUER to sign them)",
                              metadata: ["file": "\(ledger.path)"])
            }
            if let receipts {
                logger.info("Deletion receipts: one signed for each completed purge",
                            metadata: ["issuer": "\(receipts.issuer)", "kid": "\(receipts.keyID)"])
            } else {
                logger.notice("Deletion receipts are off: no receipt is signed for a completed purge (set SIWA_RECEIPT_KEY_FILE and SIWA_RECEIPT_ISSUER to sign them)")
            }
            onPrepared()
        }
        self.plan = plan
        self.services = [client, HTTPClientService(client: webhookClient)]
            + (access.map { [HTTPClientService(client: $0.httpClient)] as [any Service] } ?? [])
            + external.values.map { $0 as any Service } + [worker]
    }

    /// The plan from SIWA_PURGE_PLAN (or the built-in step only), checked
    /// whole, and its step deadlines against SIWA_JOB_MAX_RUN_SECONDS.
    public static func loadPlan(settings: WorkerSettings, environment: [String: String]) throws -> PurgePlan {
        let plan: PurgePlan
        if let path = settings.purge.planPath {
            do {
                plan = try PurgePlan.load(path: path, environment: environment)
            } catch let error as PurgePlanError {
                throw SettingError("SIWA_PURGE_PLAN", "\(path): \(error)")
            }
        } else {
            plan = .builtInOnly
        }
        if let longest = plan.longestStepSeconds, longest.seconds >= settings.worker.maxRunSeconds {
            throw SettingError("SIWA_JOB_MAX_RUN_SECONDS", "\(settings.worker.maxRunSeconds.formattedSeconds) s is too short for step '\(longest.step)', "
                               + "which may take up to \(longest.seconds.formattedSeconds) s (its timeout_seconds, plus a margin for SQL steps)")
        }
        return plan
    }

    /// A client for each SQL step on another database, by step name.
    static func externalClients(_ plan: PurgePlan) -> [String: PostgresClient] {
        var external: [String: PostgresClient] = [:]
        for step in plan.steps {
            guard case .sql(_, let other?) = step.action else { continue }
            external[step.name] = PostgresClient(configuration: other.configuration.postgresClientConfiguration,
                                                 backgroundLogger: Logger(label: "siwa.postgres.\(step.name)"))
        }
        return external
    }

    /// Webhooks: only a 2xx from the URL in the plan counts, so redirects
    /// are not followed. A refused connection fails the step at once (the
    /// job's retry, with its backoff, tries again later) instead of being
    /// retried until the step's deadline.
    /// `concurrency`: the jobs run at once, each may hold a connection (the
    /// client's default, 8 per host, would queue the app's deliveries).
    public static func webhookClient(concurrency: Int = 8) -> HTTPClient {
        var http = HTTPClient.Configuration()
        http.redirectConfiguration = .disallow
        http.connectionPool.retryConnectionEstablishment = false
        http.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(8, concurrency)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: http)
    }

    /// `siwa worker --check-plan`: every step of the plan tried without
    /// running it (PurgePlanCheck). Nil when there is no plan to check.
    /// Throws `SettingError` for a bad plan, like the worker's start-up.
    public static func checkPlan(settings: WorkerSettings, environment: [String: String],
                                 logger: Logger) async throws -> [PurgePlanCheck.Outcome]? {
        let plan = try loadPlan(settings: settings, environment: environment)
        guard !plan.steps.isEmpty else { return nil }
        let own = try settings.database.configuration(maximumConnections: 2)
        let external = externalClients(plan)
        let webhookClient = webhookClient()
        let outcomes: [PurgePlanCheck.Outcome]
        do {
            outcomes = try await own.withClient { client -> [PurgePlanCheck.Outcome] in
                if plan.hasOwnDatabaseSQL { try await Self.checkPurgeRole(settings.purge.role, client: client, logger: logger) }
                return await withTaskGroup(of: Void.self) { group in
                    for other in external.values { group.addTask { await other.run() } }
                    let check = PurgePlanCheck(plan: plan, ownDatabase: client, externalDatabases: external,
                                               webhooks: WebhookDelivery(http: webhookClient), purgeRole: settings.purge.role, logger: logger)
                    let outcomes = await check.run()
                    group.cancelAll()
                    return outcomes
                }
            }
        } catch {
            try? await webhookClient.shutdown()
            throw error
        }
        try? await webhookClient.shutdown()
        return outcomes
    }

    /// A plan with SQL steps on siwa's database needs the purge role: its
    /// absence stops start-up (and --check-plan) with a line naming it,
    /// rather than failing every purge later. Throws `SettingError`.
    public static func checkPurgeRole(_ role: String, client: PostgresClient, logger: Logger) async throws {
        let (problem, inherits) = try await PurgeRole.check(role, client: client, logger: logger)
        if let problem { throw SettingError(SettingsCatalog.purgeRole.name, problem) }
        if inherits {
            logger.warning("The worker's database role inherits the purge role's grants, so it holds them outside the plan's steps too; create it NOINHERIT (deploy/README.md, \"The database\")",
                           metadata: ["purge_role": "\(role)"])
        }
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
