import AccountLifecycle
import AccountStore

/// The job worker's own settings (SIWA_WORKER_*, SIWA_JOB_*), read into the
/// options it runs with: a new one is a field of `JobWorker.Options` and a
/// line here.
extension JobWorker.Options {
    public init(reader: SettingsReader) throws {
        typealias S = SettingsCatalog
        self.init()
        concurrency = try reader.integer(S.workerConcurrency)
        leaseSeconds = try reader.number(S.jobLease)
        retryBaseSeconds = try reader.number(S.jobRetryBase)
        maxAttempts = try reader.integer(S.jobMaxAttempts)
        retentionSeconds = try reader.number(S.jobRetentionDays) * 86400
        pollSeconds = try reader.number(S.workerPoll)
        shutdownGraceSeconds = try reader.number(S.workerShutdownGrace)
        // A run is stopped at this age and its lease no longer renewed; a
        // lease longer than the longest run would only delay rescues. (The
        // plan's step deadlines are checked against it in WorkerAssembly.)
        maxRunSeconds = try Self.maxRunSeconds(reader, leaseSeconds: leaseSeconds)
        guard maxRunSeconds >= leaseSeconds else {
            throw SettingError(S.jobMaxRun.name,
                               "must be at least SIWA_JOB_LEASE_SECONDS (\(leaseSeconds.formattedSeconds)); a lease longer than the longest run only delays rescues")
        }
    }

    /// SIWA_JOB_MAX_RUN_SECONDS, whose default is 900 s or the lease if
    /// longer (`siwa serve` reads it too, for `siwa_jobs_running_overdue`).
    public static func maxRunSeconds(_ reader: SettingsReader, leaseSeconds: Double) throws -> Double {
        let declared = Double(SettingsCatalog.jobMaxRun.defaultValue ?? "") ?? 900
        return try reader.number(SettingsCatalog.jobMaxRun, default: max(declared, leaseSeconds))
    }
}
