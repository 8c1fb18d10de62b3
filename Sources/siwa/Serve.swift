import AccountStore
import ArgumentParser
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import SIWAServer

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the HTTP server that receives Apple's notifications.",
        discussion: """
            Endpoints: POST /apple/notifications, GET /healthz, GET /readyz, GET /metrics.
            SIGTERM or SIGINT drains in-flight requests, then exits.

            Settings (environment):
              SIWA_DATABASE_URL           postgres://USER:PASSWORD@HOST:PORT/DB[?sslmode=MODE&sslrootcert=/ca.pem]
                                          (required; the runtime role, which owns nothing)
                 sslmode: disable; prefer (default: TLS if offered, else plain text: no protection);
                 require (TLS always; certificate checked against sslrootcert if given, else not);
                 verify-ca (chain checked: sslrootcert, else the system CAs); verify-full (chain
                 and host name). require/verify-* never fall back to plain text.
              SIWA_APPLE_CLIENT_IDS       comma list of accepted audiences (bundle id, services id)  (required)
              SIWA_HTTP_HOST              listen address (127.0.0.1)
              SIWA_HTTP_PORT              listen port (8080)
              SIWA_APPLE_JWKS_URL         Apple's key set (https://appleid.apple.com/auth/keys)
              SIWA_APPLE_BASE_URL         Apple's base URL (https://appleid.apple.com)
              SIWA_APPLE_JWKS_REFRESH_SECONDS           periodic key refresh (3600)
              SIWA_APPLE_JWKS_REFETCH_COOLDOWN_SECONDS  least time between refetches for unknown kids (30)
              SIWA_MAX_BODY_BYTES         request body cap (65536)
              SIWA_HTTP_IDLE_TIMEOUT_SECONDS  close a connection idle this long (60)
              SIWA_DATABASE_MAX_CONNECTIONS  pool size (20)
              SIWA_INGEST_WRITERS         group-commit writers (4)
              SIWA_INGEST_MAX_BATCH       notifications per transaction at most (64)
              SIWA_INGEST_TIMEOUT_SECONDS answer 503 if not committed by then (10)
              SIWA_ON_CONSENT_REVOKED     sign_out (keep data, no purge) or purge (as a deletion) (sign_out)
              SIWA_REJECTIONS_PER_MINUTE  refusals recorded one by one per minute; past it counted (6000)
              SIWA_REJECTION_RETENTION_DAYS  refused deliveries kept this long (30)
              SIWA_LOG_FORMAT             text or json (text);  SIWA_LOG_LEVEL (info)
              SIWA_MIGRATIONS_DIR         where the sql/ files are (found automatically)
            """
    )

    func run() async throws {
        let settings = Startup.settings { try ServerSettings(environment: Environment()) }
        LoggingSetup.bootstrap(settings.log)
        let logger = Logger(label: "siwa.serve")
        let migrator = Startup.settings { try Migrator(directory: Migrator.defaultDirectory()) }
        let app = Startup.settings {
            try ServerAssembly.makeApplication(settings: settings, migrations: migrator, logger: logger) { port in
                logger.info("Listening", metadata: ["address": "\(settings.host):\(port)"])
            }
        }
        // After every setting is checked: TLS refusing to connect stops start-up here.
        await Startup.checkTLS(Startup.settings { try DatabaseConfiguration(url: settings.databaseURL) })
        do {
            try await app.runService()
        } catch let error as MigrationError {
            Startup.fail("\(error)")
        } catch let error as PSQLError {
            Startup.databaseFailure(error, url: settings.databaseURL)
        }
    }
}
