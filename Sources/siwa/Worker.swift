import SIWAWorker
import SIWAConfiguration
import AccountLifecycle
import AccountStore
import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import Prometheus
import ServiceLifecycle
import SIWAServer

struct Worker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the purge jobs that `siwa serve` enqueues.",
        discussion: """
            Claims \(PurgeParameters.kind) jobs from siwa.jobs, runs the built-in step (erase siwa's own \
            personal data for the user, keep a tombstone) and then the purge plan's steps, \
            recording each step and the outcome in siwa.audit_log. Each SQL step on siwa's \
            database runs as SIWA_PURGE_ROLE (SET LOCAL ROLE), the role the app's tables are \
            granted to; a plan with such a step does not start without it. Start as many workers as \
            you like: a job runs in one of them at a time, and the maintenance (the rescuer, the \
            cleaner, the audit sealer, token validation) on one of them, elected by a database lock. With SIWA_RECEIPT_KEY_FILE and \
            SIWA_RECEIPT_ISSUER each completed purge also gets a signed deletion receipt \
            (siwa receipts --help), stored in the transaction that completes it.
            With SIWA_APP_WEBHOOK_URL and SIWA_APP_WEBHOOK_SECRET it also delivers every event \
            siwa records to the app's backend, signed, in order per user (app_event jobs; \
            siwa webhooks --help); without them it turns that off for every process at start.
            SIGTERM or SIGINT: stop claiming, let running jobs finish within the grace period, \
            release the rest for another worker.
            GET /healthz, /readyz and /metrics on a listener of its own (SIWA_WORKER_METRICS_HOST, \
            SIWA_WORKER_METRICS_PORT: 127.0.0.1:9091 unless set; `off` turns it off): the jobs \
            claimed, completed, retried, discarded and rescued by kind, step durations, webhook \
            failures, lost leases, the oldest running job's age, whether it leads maintenance and \
            the maintenance passes that failed, for Prometheus.

            --check-plan tries the purge plan without running it, then exits: every SQL \
            statement is PREPAREd on its database inside a transaction that is rolled back, and \
            every HTTP step gets a signed test request (body {"type":"siwa.plan_check",...}, \
            webhook-id siwa-check-<uuid>; downstreams should answer 2xx and ignore it). One line \
            per step; exit 0 if all passed, 1 if any failed.

            \(SettingsDocs.help(for: .worker))

            Exit status 2: a bad setting (a receipt key file that is no P-256 key among them), a \
            bad purge plan (the message names the step), or a schema ahead of this siwa or edited. A \
            schema that is behind is waited for (a warning each check, until `siwa migrate`).
            """
    )

    @Flag(name: .customLong("check-plan"),
          help: "Check the purge plan (PREPARE each SQL statement, send each HTTP step a signed test request) and exit.")
    var checkPlan = false

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let reader = Startup.reader(environment)
        let settings = Startup.settings { try WorkerSettings(environment: reader) }
        LoggingSetup.bootstrap(settings.log, tracing: TracingSetup.logMetadata(environment: environment))
        let logger = Logger(label: "siwa.worker")
        if checkPlan { await Self.checkPlan(settings: settings, environment: environment, logger: logger) }
        let migrator = Startup.settings { try Migrator(directory: Migrator.defaultDirectory()) }
        // Before the assembly makes its HTTP clients: AsyncHTTPClient takes
        // the process's tracer when a client is made, and then gives each
        // request a client span and a `traceparent` (a webhook's receiver
        // can join its own trace to the job step's). Its service runs first
        // in the group below, so that it stops last.
        let tracing = TracingSetup.bootstrap(serviceName: "siwa-worker", environment: environment)
        let registry = SIWAMetrics.makeRegistry()
        // Ready for systemd (Type=notify) once the listener is bound (when on)
        // and the start-up checks passed: the database answered and its
        // schema is up to date (waited for, when an upgrade's migration is pending).
        let ready = ReadinessGate(waitingFor: settings.metricsListener == nil ? 1 : 2)
        let notifier = SystemdNotifier()
        let assembly = Startup.settings {
            try WorkerAssembly(settings: settings, environment: environment, migrations: migrator,
                               migrationWait: SystemdNotifier.migrationWait(notifier),
                               metrics: SIWAMetrics.factory(for: registry), logger: logger, onPrepared: { ready.arrive() })
        }
        Startup.warnUnknownSettings(reader, also: assembly.plan.environmentNames)
        // After every setting is checked: TLS refusing to connect stops start-up here.
        await Startup.checkTLS(Startup.settings { try settings.database.configuration() })
        // After the TLS check, whose refusal is the only line start-up prints.
        let listener = Startup.settings {
            try Self.listener(settings: settings, registry: registry, logger: logger, onRunning: { ready.arrive() })
        }
        logger.info("Purge plan", metadata: ["plan": "\(WorkerAssembly.describe(assembly.plan))"])
        // The notifier last: told of a shutdown first (STOPPING=1 before the drain).
        let notify: [any Service] = notifier.map { notifier -> [any Service] in
            [SystemdNotifyService(notifier: notifier, gate: ready, status: "running jobs", logger: logger)]
        } ?? []
        // Tracing first, so that it stops last (the draining jobs' spans are exported).
        let services = (tracing.map { [$0] } ?? []) + listener + assembly.services + notify
        let group = ServiceGroup(configuration: .init(services: services.map { .init(service: $0) },
                                                      gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch is CancellationError {
            // Stopped (SIGTERM) while waiting for `siwa migrate`: nothing ran.
            return
        } catch let error as MigrationError {
            Startup.fail("\(error)")
        } catch let error as SettingError {
            Startup.fail("\(error)")
        } catch let error as PSQLError {
            Startup.databaseFailure(error, url: settings.database.url)
        }
    }

    /// The health and metrics listener's services (none when it is off),
    /// first in the group: they stop last, so a draining worker can still be scraped.
    static func listener(settings: WorkerSettings, registry: PrometheusCollectorRegistry, logger: Logger,
                         onRunning: @escaping @Sendable () -> Void = {}) throws -> [any Service] {
        guard let address = settings.metricsListener else {
            logger.info("The metrics listener is off (SIWA_WORKER_METRICS_PORT=off)")
            return []
        }
        let listenerLogger = Logger(label: "siwa.worker.metrics")
        return try MetricsListener.workerServices(host: address.host, port: address.port, databaseURL: settings.database.url,
                                           jobMaxRunSeconds: settings.worker.maxRunSeconds, registry: registry,
                                           logger: listenerLogger) { port in
            listenerLogger.info("Metrics listener: /healthz, /readyz, /metrics", metadata: ["address": "\(address.host):\(port)"])
            onRunning()
        }
    }

    /// `--check-plan`: one line per step on stdout; exit 0 if every step
    /// passed, 1 if any failed, 2 for a bad setting or plan.
    static func checkPlan(settings: WorkerSettings, environment: [String: String], logger: Logger) async -> Never {
        let outcomes: [PurgePlanCheck.Outcome]?
        do {
            outcomes = try await WorkerAssembly.checkPlan(settings: settings, environment: environment, logger: logger)
        } catch let error as SettingError {
            Startup.fail("\(error)")
        } catch let error as DatabaseConfigurationError {
            Startup.fail("SIWA_DATABASE_URL: \(error)")
        } catch {
            Startup.fail("cannot check the plan: \(safeDescription(error))", code: 1)
        }
        guard let outcomes else {
            FileHandle.standardOutput.write(Data("no SIWA_PURGE_PLAN: nothing to check (only the built-in step runs)\n".utf8))
            Foundation.exit(0)
        }
        FileHandle.standardOutput.write(Data(outcomes.map { $0.line + "\n" }.joined().utf8))
        Foundation.exit(outcomes.allSatisfy(\.passed) ? 0 : 1)
    }
}
