import AccountStore
import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import SIWAServer

struct Worker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the purge jobs that `siwa serve` enqueues.",
        discussion: """
            Claims purge_user jobs from siwa.jobs, runs the built-in step (erase siwa's own \
            personal data for the user, keep a tombstone) and then the purge plan's steps, \
            recording each step and the outcome in siwa.audit_log. Start as many workers as \
            you like: a job runs in one of them at a time.
            SIGTERM or SIGINT: stop claiming, let running jobs finish within the grace period, \
            release the rest for another worker.

            Settings (environment):
              SIWA_DATABASE_URL            postgres://USER:PASSWORD@HOST:PORT/DB[?sslmode=...&sslrootcert=...]
                                           (required; the runtime role; TLS: see siwa serve --help)
              SIWA_PURGE_PLAN              JSON file of purge steps (none: built-in step only)
              SIWA_WORKER_CONCURRENCY      jobs at once (4)
              SIWA_JOB_LEASE_SECONDS       lease of a claimed job, renewed while it runs (60)
              SIWA_JOB_RETRY_BASE_SECONDS  retry n waits base x 2^(n-1), jitter, 6 h cap (15)
              SIWA_JOB_MAX_ATTEMPTS        attempts before a job is discarded (25)
              SIWA_JOB_RETENTION_DAYS      completed jobs kept this long, then pruned (30)
              SIWA_WORKER_POLL_SECONDS     polling fallback when no NOTIFY arrives (2)
              SIWA_WORKER_SHUTDOWN_GRACE_SECONDS  time running jobs get on SIGTERM (30)
              SIWA_DATABASE_MAX_CONNECTIONS  pool size (concurrency + 4)
              SIWA_LOG_FORMAT              text or json (text);  SIWA_LOG_LEVEL (info)

            Exit status 2: a bad setting, a bad purge plan (the message names the step), or a \
            schema that is behind (run `siwa migrate`).
            """
    )

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let settings = Startup.settings { try WorkerSettings(environment: Environment(environment)) }
        LoggingSetup.bootstrap(settings.log)
        let logger = Logger(label: "siwa.worker")
        let migrator = Startup.settings { try Migrator(directory: Migrator.defaultDirectory()) }
        let assembly = Startup.settings {
            try WorkerAssembly(settings: settings, environment: environment, migrations: migrator, logger: logger)
        }
        // After every setting is checked: TLS refusing to connect stops start-up here.
        await Startup.checkTLS(Startup.settings { try DatabaseConfiguration(url: settings.databaseURL) })
        logger.info("Purge plan", metadata: ["plan": "\(WorkerAssembly.describe(assembly.plan))"])
        let group = ServiceGroup(configuration: .init(services: assembly.services.map { .init(service: $0) },
                                                      gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch let error as MigrationError {
            Startup.fail("\(error)")
        } catch let error as PSQLError {
            Startup.databaseFailure(error, url: settings.databaseURL)
        }
    }
}
