/// Every `SIWA_*` setting siwa reads. Add a setting here, read it with
/// `Environment`, and run `siwa settings --write-docs` to update README.md
/// and deploy/*.env.example (a test checks they agree).
public enum SettingsCatalog {
    // MARK: Database

    public static let databaseURL = Setting(
        "SIWA_DATABASE_URL", .databaseURL, required: true,
        example: "postgres://siwa_app:CHANGE-ME@db.internal:5432/siwa?sslmode=verify-full&sslrootcert=/etc/siwa/db-ca.pem",
        readers: [.serve, .worker, .migrate, .jobs, .apiKeys, .tokens], files: [.serve, .worker, .migrate], secret: true,
        help: "the runtime role's connection, `postgres://USER:PASSWORD@HOST:PORT/DB[?sslmode=disable|prefer|require|verify-ca|verify-full&sslrootcert=FILE]`; `siwa migrate` grants this role its privileges")
    public static let migrateDatabaseURL = Setting(
        "SIWA_MIGRATE_DATABASE_URL", .databaseURL,
        example: "postgres://siwa_owner:CHANGE-ME@db.internal:5432/siwa?sslmode=verify-full&sslrootcert=/etc/siwa/db-ca.pem",
        defaultDescription: "`SIWA_DATABASE_URL`", readers: [.migrate], files: [.migrate], secret: true,
        help: "the schema owner's connection, for `siwa migrate` only; unset, `siwa migrate` uses SIWA_DATABASE_URL (one role for everything: a trial, not production)")
    public static let databaseMaxConnections = Setting(
        "SIWA_DATABASE_MAX_CONNECTIONS", .integer(2...500), default: "20",
        defaultDescription: "`20` (serve), SIWA_WORKER_CONCURRENCY + 4 (worker)",
        readers: [.serve, .worker], files: [.serve, .worker],
        help: "connection pool size per process (the worker needs at least its concurrency + 2)")
    public static let migrationsDir = Setting(
        "SIWA_MIGRATIONS_DIR", .path, defaultDescription: "found",
        readers: [.serve, .worker, .migrate], files: [.shared],
        help: "the sql/ files: else `<prefix>/share/siwa/sql` beside the binary's `bin/`, else the source tree's `sql/`")

    // MARK: Receiver (siwa serve)

    public static let appleClientIDs = Setting(
        "SIWA_APPLE_CLIENT_IDS", .list, required: true, example: "com.example.app,com.example.web",
        readers: [.serve, .tokens], files: [.serve],
        help: "comma list of accepted audiences (`aud`): your primary App ID's bundle id, and any Services ID used for sign-in on the web")
    public static let httpHost = Setting(
        "SIWA_HTTP_HOST", .text, default: "127.0.0.1", readers: [.serve], files: [.serve],
        help: "listen address; keep loopback behind a TLS reverse proxy")
    public static let httpPort = Setting(
        "SIWA_HTTP_PORT", .integer(0...65535), default: "8080", readers: [.serve], files: [.serve],
        help: "listen port (0: any free port)")
    public static let httpIdleTimeout = Setting(
        "SIWA_HTTP_IDLE_TIMEOUT_SECONDS", .seconds(0.1...3600), default: "60", readers: [.serve], files: [.serve],
        help: "a connection idle this long (no request, or a request that stopped arriving) is closed")
    public static let maxBodyBytes = Setting(
        "SIWA_MAX_BODY_BYTES", .integer(1024...(1024 * 1024)), default: "65536", readers: [.serve], files: [.serve],
        help: "request body cap; a larger body gets 413 and the connection is closed")
    public static let appleJWKSURL = Setting(
        "SIWA_APPLE_JWKS_URL", .url, default: "https://appleid.apple.com/auth/keys", readers: [.serve], files: [.serve],
        help: "Apple's key set (change only for a test double)")
    public static let jwksRefresh = Setting(
        "SIWA_APPLE_JWKS_REFRESH_SECONDS", .seconds(10...86400), default: "3600", readers: [.serve], files: [.serve],
        help: "periodic refresh of Apple's keys")
    public static let jwksRefetchCooldown = Setting(
        "SIWA_APPLE_JWKS_REFETCH_COOLDOWN_SECONDS", .seconds(0.1...3600), default: "30", readers: [.serve], files: [.serve],
        help: "least time between refetches for unknown `kid`s; an unknown `kid` inside it is answered 503 (Apple retries)")
    public static let ingestWriters = Setting(
        "SIWA_INGEST_WRITERS", .integer(1...64), default: "4", readers: [.serve], files: [.serve],
        help: "group-commit writers (below SIWA_DATABASE_MAX_CONNECTIONS); each Apple user always goes to the same one")
    public static let ingestMaxBatch = Setting(
        "SIWA_INGEST_MAX_BATCH", .integer(1...1000), default: "64", readers: [.serve], files: [.serve],
        help: "most notifications committed in one transaction")
    public static let ingestTimeout = Setting(
        "SIWA_INGEST_TIMEOUT_SECONDS", .seconds(0.1...120), default: "10", readers: [.serve], files: [.serve],
        help: "answer 503 (Apple retries) if a notification is not committed by then")
    public static let onConsentRevoked = Setting(
        "SIWA_ON_CONSENT_REVOKED", .choice(["sign_out", "purge"]), default: "sign_out", readers: [.serve, .worker],
        files: [.shared],
        help: "`consent-revoked` (and a refresh token Apple answers `invalid_grant` for): `sign_out` keeps the user's data (tokens revoked and deleted, no purge); `purge` runs the purge plan as for a deletion")
    public static let rejectionsPerMinute = Setting(
        "SIWA_REJECTIONS_PER_MINUTE", .integer(0...1_000_000), default: "6000", readers: [.serve], files: [.serve],
        help: "refused deliveries stored one by one per minute; the rest are counted (`siwa_rejections_unrecorded_total`, one summary row a minute)")
    public static let floodDelay = Setting(
        "SIWA_FLOOD_DELAY_SECONDS", .seconds(0...10), default: "1", readers: [.serve], files: [.serve],
        help: "during a flood of junk (refusals faster than SIWA_REJECTIONS_PER_MINUTE / 60 in a second, and 30 s after), each refusal's answer is held about this long (0.5 to 1.5 times; at most 4096 at once), so the flood cannot starve Apple's notifications, whose answers are never held; 0: never")
    public static let rejectionRetentionDays = Setting(
        "SIWA_REJECTION_RETENTION_DAYS", .integer(1...3650), default: "30", readers: [.serve], files: [.serve],
        help: "rows of `siwa.rejected_notifications` older than this are pruned")

    // MARK: Sign-in and Apple's tokens (serve's /v1 API, the worker's validation and revocation)

    public static let appleTeamID = Setting(
        "SIWA_APPLE_TEAM_ID", .text, example: "ABCDE12345", readers: [.serve, .worker, .tokens], files: [.shared],
        help: "your Apple Developer Team ID (10 characters; Membership details in the developer account); with the three settings below it turns sign-in on")
    public static let appleKeyID = Setting(
        "SIWA_APPLE_KEY_ID", .text, example: "XYZ987WVU6", readers: [.serve, .worker, .tokens], files: [.shared],
        help: "the Key ID of the Sign in with Apple private key (Certificates, Identifiers & Profiles > Keys)")
    public static let applePrivateKeyFile = Setting(
        "SIWA_APPLE_PRIVATE_KEY_FILE", .path, example: "/etc/siwa/AuthKey_XYZ987WVU6.p8", readers: [.serve, .worker, .tokens],
        files: [.shared],
        help: "that key's `.p8` file (PKCS#8 PEM, P-256), readable by the service user only; it signs the client secret")
    public static let tokenEncryptionKeysFile = Setting(
        "SIWA_TOKEN_ENCRYPTION_KEYS_FILE", .path, example: "/etc/siwa/token-keys", readers: [.serve, .worker, .tokens],
        files: [.shared],
        help: "the key ring that encrypts stored Apple tokens: lines `KEY_ID:BASE64_OF_32_BYTES` (`siwa tokens keygen`); the first encrypts, all decrypt")
    public static let appleBaseURL = Setting(
        "SIWA_APPLE_BASE_URL", .url, default: "https://appleid.apple.com", readers: [.serve, .worker, .tokens], files: [.shared],
        help: "Apple's base URL: `<base>/auth/token` and `<base>/auth/revoke` (change only for a test double)")
    public static let clientSecretTTL = Setting(
        "SIWA_CLIENT_SECRET_TTL_SECONDS", .integer(60...15_777_000), default: "3600", readers: [.serve, .worker, .tokens],
        files: [.shared],
        help: "lifetime of the ES256 client secret siwa signs for Apple (cached, renewed before it expires; Apple allows up to 6 months)")
    public static let appleRequestTimeout = Setting(
        "SIWA_APPLE_REQUEST_TIMEOUT_SECONDS", .seconds(0.5...120), default: "10", readers: [.serve, .worker, .tokens],
        files: [.shared],
        help: "one deadline for each call to Apple's token endpoints (connect, answer and body); past it sign-in answers 503")
    public static let refreshValidationHours = Setting(
        "SIWA_REFRESH_VALIDATION_HOURS", .integer(0...8760), default: "24", readers: [.serve, .worker, .tokens], files: [.shared],
        help: "each stored refresh token is checked with Apple once per this many hours (at least 24, Apple's limit), spread over the period; `0` turns validation off")
    public static let appleRequestsPerSecond = Setting(
        "SIWA_APPLE_REQUESTS_PER_SECOND", .integer(0...10_000), default: "20", readers: [.worker], files: [.worker],
        help: "most validation calls to Apple per second per worker (`0`: no cap)")

    // MARK: Worker (siwa worker; serve reads the lease and run time for /metrics)

    public static let purgePlan = Setting(
        "SIWA_PURGE_PLAN", .path, example: "/etc/siwa/purge-plan.json", readers: [.worker], files: [.worker],
        help: "the purge plan (JSON); without it only the built-in step runs, and the worker says so at start")
    public static let workerConcurrency = Setting(
        "SIWA_WORKER_CONCURRENCY", .integer(1...256), default: "4", readers: [.worker], files: [.worker],
        help: "jobs run at once")
    public static let jobLease = Setting(
        "SIWA_JOB_LEASE_SECONDS", .seconds(1...86400), default: "60", readers: [.serve, .worker], files: [.shared],
        help: "a claimed job's lease, renewed every third of it while the job runs; an expired lease is rescued")
    public static let jobMaxRun = Setting(
        "SIWA_JOB_MAX_RUN_SECONDS", .seconds(1...86400), default: "900", defaultDescription: "`900`, or the lease if longer",
        readers: [.serve, .worker], files: [.shared],
        help: "an attempt running longer is stopped and retried (its lease no longer renewed); at least the lease and every step's timeout")
    public static let jobRetryBase = Setting(
        "SIWA_JOB_RETRY_BASE_SECONDS", .seconds(0.001...21600), default: "15", readers: [.worker], files: [.worker],
        help: "retry n waits base × 2^(n−1) plus up to 20% jitter, capped at 6 h")
    public static let jobMaxAttempts = Setting(
        "SIWA_JOB_MAX_ATTEMPTS", .integer(1...1000), default: "25", readers: [.worker], files: [.worker],
        help: "attempts before a job is `discarded` (its error history kept)")
    public static let jobRetentionDays = Setting(
        "SIWA_JOB_RETENTION_DAYS", .days(0...3650), default: "30", readers: [.worker], files: [.worker],
        help: "completed and cancelled jobs are pruned after this (the audit trail stays)")
    public static let workerPoll = Setting(
        "SIWA_WORKER_POLL_SECONDS", .seconds(0.05...600), default: "2", readers: [.worker], files: [.worker],
        help: "polling fallback; NOTIFY wakes the worker at once")
    public static let workerShutdownGrace = Setting(
        "SIWA_WORKER_SHUTDOWN_GRACE_SECONDS", .seconds(0...3600), default: "30", readers: [.worker], files: [.worker],
        help: "on SIGTERM, running jobs get this long to finish; the rest are released")

    // MARK: Logging (every command)

    public static let logFormat = Setting(
        "SIWA_LOG_FORMAT", .choice(["text", "json"]), default: "text", readers: Set(Setting.Reader.allCases), files: [.shared],
        help: "one line per event, as text or as a JSON object")
    public static let logLevel = Setting(
        "SIWA_LOG_LEVEL", .choice(["trace", "debug", "info", "notice", "warning", "error", "critical"]), default: "info",
        readers: Set(Setting.Reader.allCases), files: [.shared],
        help: "the least severe level logged")

    /// All of them, in the order the docs list them.
    public static let all: [Setting] = [
        databaseURL, migrateDatabaseURL, databaseMaxConnections, migrationsDir,
        appleClientIDs, httpHost, httpPort, httpIdleTimeout, maxBodyBytes, appleJWKSURL, jwksRefresh,
        jwksRefetchCooldown, ingestWriters, ingestMaxBatch, ingestTimeout, onConsentRevoked, rejectionsPerMinute,
        floodDelay, rejectionRetentionDays,
        appleTeamID, appleKeyID, applePrivateKeyFile, tokenEncryptionKeysFile, appleBaseURL, clientSecretTTL,
        appleRequestTimeout, refreshValidationHours, appleRequestsPerSecond,
        purgePlan, workerConcurrency, jobLease, jobMaxRun, jobRetryBase, jobMaxAttempts, jobRetentionDays, workerPoll,
        workerShutdownGrace,
        logFormat, logLevel,
    ]

    /// `SIWA_*` names that belong to siwa's development tools, not to a
    /// command (scripts/testdb.sh, the tests, the bench, siwa-demo).
    public static let toolPrefixes = ["SIWA_PG_", "SIWA_TEST_", "SIWA_BENCH_", "SIWA_DEMO_"]
}
