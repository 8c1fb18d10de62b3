import AccountEvents
import AccountStore
import Foundation

/// Everything `siwa worker` is configured with.
public struct WorkerSettings: Sendable {
    public var databaseURL: String
    public var databaseMaxConnections: Int
    public var worker: JobWorker.Options
    /// nil: no SIWA_PURGE_PLAN, only the built-in step runs.
    public var purgePlanPath: String?
    public var log: LogSettings

    /// SIWA_JOB_MAX_RUN_SECONDS when not set (or the lease, if longer).
    public static let defaultMaxRunSeconds = 900.0

    /// SIWA_JOB_MAX_RUN_SECONDS (`siwa serve` reads it too, for the
    /// `siwa_jobs_running_overdue` gauge).
    static func maxRunSeconds(_ env: Environment, leaseSeconds: Double) throws -> Double {
        try env.seconds("SIWA_JOB_MAX_RUN_SECONDS", default: max(defaultMaxRunSeconds, leaseSeconds), range: 1...86400)
    }

    public init(environment env: Environment) throws {
        databaseURL = try env.required("SIWA_DATABASE_URL", example: "postgres://siwa:secret@127.0.0.1:5432/siwa")
        var options = JobWorker.Options()
        options.concurrency = try env.integer("SIWA_WORKER_CONCURRENCY", default: 4, range: 1...256)
        options.leaseSeconds = try env.seconds("SIWA_JOB_LEASE_SECONDS", default: 60, range: 1...86400)
        options.retryBaseSeconds = try env.seconds("SIWA_JOB_RETRY_BASE_SECONDS", default: 15, range: 0.001...21600)
        options.maxAttempts = try env.integer("SIWA_JOB_MAX_ATTEMPTS", default: 25, range: 1...1000)
        options.retentionSeconds = try env.seconds("SIWA_JOB_RETENTION_DAYS", default: 30, range: 0...3650) * 86400
        options.pollSeconds = try env.seconds("SIWA_WORKER_POLL_SECONDS", default: 2, range: 0.05...600)
        options.shutdownGraceSeconds = try env.seconds("SIWA_WORKER_SHUTDOWN_GRACE_SECONDS", default: 30, range: 0...3600)
        // A run is stopped at this age and its lease no longer renewed; a
        // lease longer than the longest run would only delay rescues. (The
        // plan's step deadlines are checked against it in WorkerAssembly.)
        options.maxRunSeconds = try Self.maxRunSeconds(env, leaseSeconds: options.leaseSeconds)
        guard options.maxRunSeconds >= options.leaseSeconds else {
            throw SettingError("SIWA_JOB_MAX_RUN_SECONDS",
                               "must be at least SIWA_JOB_LEASE_SECONDS (\(options.leaseSeconds.formattedSeconds)); a lease longer than the longest run only delays rescues")
        }
        worker = options
        // The claimer, the LISTEN connection and the heartbeat need one each
        // beside the running jobs.
        databaseMaxConnections = try env.integer("SIWA_DATABASE_MAX_CONNECTIONS", default: options.concurrency + 4, range: 2...500)
        guard databaseMaxConnections >= options.concurrency + 2 else {
            throw SettingError("SIWA_DATABASE_MAX_CONNECTIONS", "must be at least SIWA_WORKER_CONCURRENCY + 2 (\(options.concurrency + 2)) for the worker")
        }
        purgePlanPath = env.string("SIWA_PURGE_PLAN")
        log = try LogSettings(environment: env)
    }
}
