import AccountLifecycle
import AccountStore
import Foundation

/// Everything `siwa worker` is configured with (declared in SettingsCatalog).
public struct WorkerSettings: Sendable {
    public var databaseURL: String
    public var databaseMaxConnections: Int
    public var worker: JobWorker.Options
    /// nil: no SIWA_PURGE_PLAN, only the built-in step runs.
    public var purgePlanPath: String?
    /// The role the plan's SQL steps on siwa's database run as.
    public var purgeRole: String
    public var log: LogSettings
    /// nil: no sign-in settings; a user with stored tokens cannot be purged
    /// (the revocation step fails and says why) and nothing is validated.
    public var signIn: SignInSettings?
    public var tokenValidation: TokenValidationSettings
    /// nil: no deletion receipts are signed (the worker says so at start).
    public var receipts: ReceiptSettings?
    /// How often the audit chain's head is logged.
    public var auditHeadLogMinutes: Int
    /// Refused deliveries older than this are pruned (by the worker that leads maintenance).
    public var rejectionRetentionDays: Int
    /// Where the worker appends each completed erasure (ErasureLedger).
    public var erasureLedgerDirectory: String
    /// nil: no health and metrics listener (SIWA_WORKER_METRICS_PORT=off).
    public var metricsListener: ListenerAddress?
    /// nil: the app events webhook is off (no SIWA_APP_WEBHOOK_URL); the
    /// worker turns the enqueueing of deliveries off at start.
    public var appWebhook: AppWebhookSettings?

    /// SIWA_JOB_MAX_RUN_SECONDS, whose default is 900 s or the lease if
    /// longer (`siwa serve` reads it too, for `siwa_jobs_running_overdue`).
    static func maxRunSeconds(_ env: SettingsReader, leaseSeconds: Double) throws -> Double {
        let declared = Double(SettingsCatalog.jobMaxRun.defaultValue ?? "") ?? 900
        return try env.number(SettingsCatalog.jobMaxRun, default: max(declared, leaseSeconds))
    }

    public init(environment env: SettingsReader) throws {
        typealias S = SettingsCatalog
        databaseURL = try env.required(S.databaseURL)
        var options = JobWorker.Options()
        options.concurrency = try env.integer(S.workerConcurrency)
        options.leaseSeconds = try env.number(S.jobLease)
        options.retryBaseSeconds = try env.number(S.jobRetryBase)
        options.maxAttempts = try env.integer(S.jobMaxAttempts)
        options.retentionSeconds = try env.number(S.jobRetentionDays) * 86400
        options.pollSeconds = try env.number(S.workerPoll)
        options.shutdownGraceSeconds = try env.number(S.workerShutdownGrace)
        // A run is stopped at this age and its lease no longer renewed; a
        // lease longer than the longest run would only delay rescues. (The
        // plan's step deadlines are checked against it in WorkerAssembly.)
        options.maxRunSeconds = try Self.maxRunSeconds(env, leaseSeconds: options.leaseSeconds)
        guard options.maxRunSeconds >= options.leaseSeconds else {
            throw SettingError(S.jobMaxRun.name,
                               "must be at least SIWA_JOB_LEASE_SECONDS (\(options.leaseSeconds.formattedSeconds)); a lease longer than the longest run only delays rescues")
        }
        worker = options
        // The claimer, the LISTEN connection and the heartbeat need one each
        // beside the running jobs.
        databaseMaxConnections = try env.integer(S.databaseMaxConnections, default: options.concurrency + 4)
        guard databaseMaxConnections >= options.concurrency + 2 else {
            throw SettingError(S.databaseMaxConnections.name,
                               "must be at least SIWA_WORKER_CONCURRENCY + 2 (\(options.concurrency + 2)) for the worker")
        }
        purgePlanPath = env.string(S.purgePlan)
        purgeRole = try env.text(S.purgeRole)
        log = try LogSettings(environment: env)
        signIn = try SignInSettings.read(env)
        tokenValidation = try TokenValidationSettings(environment: env)
        receipts = try ReceiptSettings.read(env)
        auditHeadLogMinutes = try env.integer(S.auditHeadLogMinutes)
        rejectionRetentionDays = try env.integer(S.rejectionRetentionDays)
        erasureLedgerDirectory = try env.text(S.erasureLedgerDir)
        metricsListener = try env.listenerPort(S.workerMetricsPort).map { ListenerAddress(host: try env.text(S.workerMetricsHost), port: $0) }
        appWebhook = try AppWebhookSettings.read(env)
    }
}

/// Where a listener of siwa's binds.
public struct ListenerAddress: Sendable, Equatable {
    public var host: String
    /// 0: any free port.
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }
}
