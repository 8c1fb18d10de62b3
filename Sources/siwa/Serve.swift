import SIWAConfiguration
import AccountStore
import ArgumentParser
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import ServiceLifecycle
import SIWAServer

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the HTTP server: Apple's notifications, and the /v1 sign-in API when configured.",
        discussion: """
            The public listener (SIWA_HTTP_HOST, SIWA_HTTP_PORT: 127.0.0.1:8080 unless set), the one \
            a reverse proxy exposes: POST /apple/notifications, GET /healthz, GET /readyz, GET /metrics; \
            with SIWA_RECEIPT_JWKS_FILE also GET /.well-known/siwa-receipts.json (the deletion \
            receipts' public keys).
            The API listener, for the app's backend, on an address and port of its own \
            (SIWA_API_HTTP_HOST, SIWA_API_HTTP_PORT: 127.0.0.1:8082 unless set; `off` turns it off), \
            with the sign-in settings (SIWA_APPLE_TEAM_ID, SIWA_APPLE_KEY_ID, SIWA_APPLE_PRIVATE_KEY_FILE, \
            SIWA_TOKEN_ENCRYPTION_KEYS_FILE) only: POST /v1/sign-in, GET and DELETE /v1/users/{apple_sub}, \
            each with `Authorization: Bearer KEY` (siwa api-keys create).
            The admin listener, on an address and port of its own (SIWA_ADMIN_HTTP_HOST, \
            SIWA_ADMIN_HTTP_PORT: 127.0.0.1:8081 unless set; `off` turns it off): the page GET /admin \
            and its JSON routes, for admin keys only (siwa api-keys create NAME --scope admin), as \
            `Authorization: Bearer KEY` or, in a browser, HTTP Basic with the key as the password.
            SIGTERM or SIGINT drains in-flight requests, then exits.

            TLS to PostgreSQL (SIWA_DATABASE_URL's sslmode): disable; prefer (default: TLS if \
            offered, else plain text: no protection); require (TLS always; the certificate is \
            checked against sslrootcert if given, else not); verify-ca (chain checked: \
            sslrootcert, else the system CAs); verify-full (chain and host name). require and \
            verify-* never fall back to plain text.

            \(SettingsDocs.help(for: .serve))
            """
    )

    func run() async throws {
        let environment = Startup.reader()
        let settings = Startup.settings { try ServerSettings(environment: environment) }
        Startup.warnUnknownSettings(environment)
        LoggingSetup.bootstrap(settings.log, tracing: TracingSetup.logMetadata(environment: environment.values))
        let logger = Logger(label: "siwa.serve")
        let migrator = Startup.settings { try Migrator(directory: Migrator.defaultDirectory()) }
        // Ready for systemd (Type=notify) once the public listener is bound,
        // which is after the database answered the schema check, and the
        // admin, API and metrics listeners too when they are on.
        let listeners = 1 + (settings.admin == nil ? 0 : 1) + (settings.signIn == nil || settings.api == nil ? 0 : 1)
            + (settings.metrics == nil ? 0 : 1)
        let ready = ReadinessGate(waitingFor: listeners)
        let notifier = SystemdNotifier()
        var app = Startup.settings {
            try ServerAssembly.makeApplication(settings: settings, migrations: migrator,
                                               migrationWait: SystemdNotifier.migrationWait(notifier), logger: logger, onServerRunning: { port in
                logger.info("Listening", metadata: ["address": "\(settings.http.host):\(port)"])
                ready.arrive()
            }, onAdminRunning: { _ in ready.arrive() }, onAPIRunning: { _ in ready.arrive() },
               onMetricsRunning: { _ in ready.arrive() })
        }
        // After every setting is checked: TLS refusing to connect stops start-up here.
        await Startup.checkTLS(Startup.settings { try settings.database.configuration() })
        // First, so that it stops last: the spans of a draining server are exported.
        if let tracing = TracingSetup.bootstrap(serviceName: "siwa-serve", environment: environment.values) {
            app.services.insert(tracing, at: 0)
        }
        // The notifier after the application: told of a shutdown first, so
        // systemd hears STOPPING=1 before the drain, not after it.
        let notify = notifier.map {
            SystemdNotifyService(notifier: $0, gate: ready, status: "serving", logger: logger) as any Service
        }
        let group = ServiceGroup(configuration: .init(services: ([app as any Service] + (notify.map { [$0] } ?? [])).map { .init(service: $0) },
                                                      gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch is CancellationError {
            // Stopped (SIGTERM) while waiting for `siwa migrate`: nothing ran.
            return
        } catch let error as MigrationError {
            Startup.fail("\(error)")
        } catch let error as PSQLError {
            Startup.databaseFailure(error, url: settings.database.url)
        }
    }
}
