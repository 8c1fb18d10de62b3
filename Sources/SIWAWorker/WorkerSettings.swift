import AccountLifecycle
import AccountStore
import SIWAConfiguration

/// Everything `siwa worker` is configured with, as one settings value per
/// component, each read from its own settings (declared in SettingsCatalog)
/// where that component's value is defined. A new setting is a declaration
/// and a line in its component's reader; this list changes only with a new
/// component. Reading everything here, before anything is built, keeps every
/// refusal of a bad value at start-up, before a client exists.
public struct WorkerSettings: Sendable {
    public var database: DatabaseSettings
    /// The job worker: concurrency, leases, retries, retention.
    public var worker: JobWorker.Options
    public var purge: PurgeSettings
    public var log: LogSettings
    /// nil: no sign-in settings; a user with stored tokens cannot be purged
    /// (the revocation step fails and says why) and nothing is validated.
    public var signIn: SignInSettings?
    public var tokenValidation: TokenValidationSettings
    /// nil: no deletion receipts are signed (the worker says so at start).
    public var receipts: ReceiptSettings?
    /// The duties of the worker that leads maintenance.
    public var maintenance: MaintenanceSettings
    /// nil: no health and metrics listener (SIWA_WORKER_METRICS_PORT=off).
    public var metricsListener: ListenerAddress?
    /// nil: the app events webhook is off (no SIWA_APP_WEBHOOK_URL); the
    /// worker turns the enqueueing of deliveries off at start.
    public var appWebhook: AppWebhookTarget?

    public init(environment reader: SettingsReader) throws {
        typealias S = SettingsCatalog
        // The URL first: without it nothing else matters.
        _ = try reader.required(S.databaseURL)
        worker = try JobWorker.Options(reader: reader)
        // The claimer, the LISTEN connection and the heartbeat need one each
        // beside the running jobs.
        database = try DatabaseSettings(reader: reader, defaultMaxConnections: worker.concurrency + 4)
        guard database.maxConnections >= worker.concurrency + 2 else {
            throw SettingError(S.databaseMaxConnections.name,
                               "must be at least SIWA_WORKER_CONCURRENCY + 2 (\(worker.concurrency + 2)) for the worker")
        }
        purge = try PurgeSettings(reader: reader)
        log = try LogSettings(environment: reader)
        signIn = try SignInSettings.read(reader)
        tokenValidation = try TokenValidationSettings(environment: reader)
        receipts = try ReceiptSettings.read(reader)
        maintenance = try MaintenanceSettings(reader: reader)
        metricsListener = try ListenerAddress.workerMetrics(reader: reader)
        appWebhook = try AppWebhookTarget.read(reader)
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

    /// The worker's health and metrics listener; nil when
    /// SIWA_WORKER_METRICS_PORT is `off`.
    static func workerMetrics(reader: SettingsReader) throws -> ListenerAddress? {
        try reader.listenerPort(SettingsCatalog.workerMetricsPort).map {
            ListenerAddress(host: try reader.text(SettingsCatalog.workerMetricsHost), port: $0)
        }
    }
}
