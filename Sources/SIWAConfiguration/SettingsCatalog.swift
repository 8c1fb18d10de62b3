/// Every `SIWA_*` setting siwa reads. Add a setting here (and to a section
/// of `sections`), read it in the settings value of the component that uses
/// it (its `init(reader:)`, e.g. `RejectionWriter.Options`; nothing between
/// carries it), then regenerate docs/settings.md's table (`siwa settings
/// --markdown`) and the deploy/*.env.example files (`siwa settings
/// --env-file NAME`); a test checks they agree.
public enum SettingsCatalog {
    // MARK: Database

    public static let databaseURL = Setting(
        "SIWA_DATABASE_URL", .databaseURL, required: true,
        example: "postgres://siwa_serve:CHANGE-ME@db.internal:5432/siwa?sslmode=verify-full&sslrootcert=/etc/siwa/db-ca.pem",
        fileExamples: [
            .worker: "postgres://siwa_worker:CHANGE-ME@db.internal:5432/siwa?sslmode=verify-full&sslrootcert=/etc/siwa/db-ca.pem",
            .migrate: "postgres://siwa_owner:CHANGE-ME-TOO@db.internal:5432/siwa?sslmode=verify-full&sslrootcert=/etc/siwa/db-ca.pem",
        ],
        readers: [.serve, .worker, .migrate, .jobs, .audit, .apiKeys, .tokens, .receipts, .transfer], files: [.serve, .worker, .migrate], secret: true,
        help: "this process's connection, `postgres://USER:PASSWORD@HOST:PORT/DB[?sslmode=disable|prefer|require|verify-ca|verify-full&sslrootcert=FILE]`: serve's role for serve, the worker's for the worker, the schema owner for `siwa migrate`",
        details: """
            Each unit names its own role: siwa_serve for siwa-serve, siwa_worker for \
            siwa-worker (and `siwa tokens`), the schema owner siwa_owner \
            for siwa-migrate; each URL in a file only its unit loads (serve.database-url, \
            worker.database-url, migrate.database-url). The runtime roles own nothing: \
            `siwa migrate` grants each what its process needs (SIWA_SERVE_ROLE, \
            SIWA_WORKER_ROLE). For migrate it is the owner's connection when \
            SIWA_MIGRATE_DATABASE_URL is unset, and, where neither runtime role exists (a \
            one-role trial), the role that gets both processes' privileges. Percent-encode \
            special characters in the password.
            - sslmode=verify-full: TLS always; the server's certificate must chain to \
            sslrootcert (else the system's CAs) and name HOST. Use it whenever the database \
            is on another machine.
            - sslmode=verify-ca: as verify-full, without the name check.
            - sslmode=require: TLS always; the certificate is checked against sslrootcert \
            when given (chain only), else not at all (encrypted, but not authenticated).
            - sslmode=prefer (the default): TLS if the server offers it, else plain text: \
            no protection against an attacker in the path.
            - sslmode=disable: no TLS (a database on 127.0.0.1 or a Unix-only host).
            require, verify-ca and verify-full never fall back to plain text. sslrootcert: \
            the absolute path of a PEM file of CA certificates, readable by the service \
            users (a CA certificate is public: mode 0644); a missing or unreadable file \
            stops start-up naming SIWA_DATABASE_URL (deploy/README.md, "TLS to PostgreSQL").
            """)
    public static let migrateDatabaseURL = Setting(
        "SIWA_MIGRATE_DATABASE_URL", .databaseURL,
        example: "postgres://siwa_owner:CHANGE-ME-TOO@db.internal:5432/siwa?sslmode=verify-full&sslrootcert=/etc/siwa/db-ca.pem",
        defaultDescription: "`SIWA_DATABASE_URL`", readers: [.migrate], files: [.migrate], secret: true,
        help: "the schema owner's connection, for `siwa migrate` only; unset, `siwa migrate` connects with SIWA_DATABASE_URL",
        details: """
            The owner of the schema (DDL): `siwa migrate` connects as this role, applies the \
            pending sql/ files, then grants SIWA_SERVE_ROLE and SIWA_WORKER_ROLE their \
            privileges (or, where neither exists, the user named in SIWA_DATABASE_URL: a \
            one-role trial). Set it where SIWA_DATABASE_URL names a runtime role; it takes the \
            same sslmode and sslrootcert parameters.
            """)
    public static let serveRole = Setting(
        "SIWA_SERVE_ROLE", .text, default: "siwa_serve", readers: [.migrate], files: [.migrate],
        help: "the database role `siwa serve` connects as (serve.env's SIWA_DATABASE_URL); `siwa migrate` grants it serve's privileges",
        details: """
            Create it beforehand, LOGIN, owning nothing (deploy/README.md, "The database"). \
            serve's role records notifications, signs users in and checks API keys; it \
            cannot write the audit chain, its seal mark, deletion receipts or a job's \
            steps_done. When neither SIWA_SERVE_ROLE nor SIWA_WORKER_ROLE exists, `siwa \
            migrate` grants both processes' privileges to the user of SIWA_DATABASE_URL \
            (one role for both: a trial), and serve and worker warn at start.
            """)
    public static let workerRole = Setting(
        "SIWA_WORKER_ROLE", .text, default: "siwa_worker", readers: [.migrate], files: [.migrate],
        help: "the database role `siwa worker` (and `siwa tokens`) connects as (worker.env's SIWA_DATABASE_URL); `siwa migrate` grants it the worker's privileges",
        details: """
            Create it beforehand, LOGIN NOINHERIT, owning nothing, and grant it \
            SIWA_PURGE_ROLE (deploy/README.md, "The database"). The worker's role runs the \
            queue, erases, seals the audit chain and signs receipts; it cannot create API \
            keys nor record notifications.
            """)
    public static let purgeRole = Setting(
        "SIWA_PURGE_ROLE", .text, default: "siwa_purge", readers: [.worker], files: [.worker],
        help: "the role each SQL step of the purge plan on siwa's database runs as (`SET LOCAL ROLE`)",
        details: """
            A NOLOGIN role the operator creates, grants to the worker's role (whose \
            NOINHERIT keeps it from using the grants directly) and grants what the plan's \
            statements do on the app's tables: serve never holds them. With such a step in \
            the plan, the worker and `siwa worker --check-plan` refuse to start when the role \
            is missing or not granted to the worker's role.
            """)
    public static let databaseMaxConnections = Setting(
        "SIWA_DATABASE_MAX_CONNECTIONS", .integer(2...500), default: "20",
        defaultDescription: "`20` (serve), SIWA_WORKER_CONCURRENCY + 4 (worker)",
        readers: [.serve, .worker], files: [.serve, .worker],
        help: "connection pool size per process (the worker needs at least its concurrency + 2)",
        details: """
            Each process has a pool of its own: keep the sum over all of siwa's processes \
            below the database's max_connections. Each worker also holds one connection \
            beside its pool, for the maintenance lock.
            """)
    public static let migrationsDir = Setting(
        "SIWA_MIGRATIONS_DIR", .path, example: "/usr/local/share/siwa/sql", defaultDescription: "searched for",
        readers: [.serve, .worker, .migrate], files: [.shared],
        help: "the sql/ files: else `<prefix>/share/siwa/sql` beside the binary's `bin/`, else the source tree's `sql/`",
        details: """
            For /usr/local/bin/siwa: /usr/local/share/siwa/sql. serve and worker read the \
            files too, at start: they wait while a migration is pending (until `siwa migrate`).
            """)

    // MARK: Receiver (siwa serve)

    public static let appleClientIDs = Setting(
        "SIWA_APPLE_CLIENT_IDS", .list, example: "com.example.app,com.example.web",
        readers: [.serve, .tokens, .transfer, .migrate], files: [.serve], setInExamples: true,
        help: "comma list of accepted audiences (`aud`): your primary App ID's bundle id, and any Services ID used for sign-in on the web; required unless SIWA_APPLE_CLIENTS_FILE",
        details: """
            Notifications carry the primary App ID's bundle id as `aud`: without it here \
            every notification is refused (`wrong_aud`). Sign-in accepts identity tokens \
            issued to any of them. All belong to the team SIWA_APPLE_TEAM_ID; apps and \
            websites of several teams are listed in SIWA_APPLE_CLIENTS_FILE instead.
            """)
    public static let appleClientsFile = Setting(
        "SIWA_APPLE_CLIENTS_FILE", .path, example: "/etc/siwa/clients.json",
        readers: [.serve, .worker, .tokens, .transfer, .migrate], files: [.shared],
        help: "several apps and teams on one siwa: a JSON file naming each client id's team, whether it is a web client, and the key that signs its client secret (its own or its team's); replaces SIWA_APPLE_TEAM_ID, SIWA_APPLE_CLIENT_IDS, SIWA_APPLE_WEB_CLIENT_IDS, SIWA_APPLE_KEY_ID and SIWA_APPLE_PRIVATE_KEY_FILE",
        details: """
            Apple's `sub` is scoped to a developer team, so siwa keys users by team and \
            sub: a notification's or identity token's `aud` names the client, the client \
            its team. The file (docs/several-teams.md has the whole shape):
            `{"teams": {"ABCDE12345": {"key_id": "XYZ987WVU6", "private_key_file": \
            "/etc/siwa/AuthKey_XYZ987WVU6.p8"}}, "clients": {"com.example.app": {"team": \
            "ABCDE12345"}, "com.example.web": {"team": "ABCDE12345", "web": true, \
            "return_urls": ["https://example.com/auth/apple/callback"]}}}`. A client's \
            `key_id` and `private_key_file` override its team's. With \
            SIWA_TOKEN_ENCRYPTION_KEYS_FILE set (sign-in on), every client needs a key. \
            An unknown name in the file stops start-up.
            """)
    public static let appleWebClientIDs = Setting(
        "SIWA_APPLE_WEB_CLIENT_IDS", .list, example: "com.example.web=https://example.com/auth/apple/callback",
        readers: [.serve], files: [.serve],
        help: "comma list of the client ids of SIWA_APPLE_CLIENT_IDS that are web clients (Services IDs), each as `ID` or `ID=RETURN_URL` (repeat the id for each Return URL)",
        details: """
            A web client (Sign in with Apple JS, or an Android app) sends POST /v1/sign-in \
            its authorization code with the redirect_uri of its authorization request, \
            which Apple requires for its code. For a client id listed here, a sign-in \
            without redirect_uri is refused before Apple is called (400 \
            redirect_uri_required); with Return URLs listed (the https URLs registered for \
            the Services ID at Apple), so is a redirect_uri that is none of them. Each id \
            must also be in SIWA_APPLE_CLIENT_IDS. Unset: no client id is taken for a web \
            client, and Apple alone judges a code's redirect_uri.
            """)
    public static let httpHost = Setting(
        "SIWA_HTTP_HOST", .text, default: "127.0.0.1", readers: [.serve], files: [.serve],
        help: "the public listener's address (POST /apple/notifications, /healthz, /readyz, the receipts' key set); keep loopback behind a TLS reverse proxy",
        details: """
            Apple posts only to HTTPS on port 443: keep 127.0.0.1 and put a TLS reverse \
            proxy in front that forwards only POST /apple/notifications (deploy/README.md, \
            "TLS and the public endpoint"). /v1 is not on this listener (see \
            SIWA_API_HTTP_HOST), nor /metrics (SIWA_METRICS_HTTP_HOST).
            """)
    public static let httpPort = Setting(
        "SIWA_HTTP_PORT", .integer(0...65535), default: "8080", readers: [.serve], files: [.serve],
        help: "the public listener's port (0: any free port)")
    public static let httpIdleTimeout = Setting(
        "SIWA_HTTP_IDLE_TIMEOUT_SECONDS", .seconds(0.1...3600), default: "60", readers: [.serve], files: [.serve],
        help: "a connection idle this long (no request, or a request that stopped arriving) is closed")
    public static let maxBodyBytes = Setting(
        "SIWA_MAX_BODY_BYTES", .integer(1024...(1024 * 1024)), default: "65536", readers: [.serve], files: [.serve],
        help: "request body cap; a larger body gets 413 and the connection is closed",
        details: """
            A proxy in front has a cap of its own (nginx: client_max_body_size); keep the \
            two alike.
            """)
    public static let appleJWKSURL = Setting(
        "SIWA_APPLE_JWKS_URL", .url, default: "https://appleid.apple.com/auth/keys", readers: [.serve], files: [.serve],
        help: "Apple's key set (change only for a test double)")
    public static let jwksRefresh = Setting(
        "SIWA_APPLE_JWKS_REFRESH_SECONDS", .seconds(10...86400), default: "3600", readers: [.serve], files: [.serve],
        help: "periodic refresh of Apple's keys")
    public static let jwksRefetchCooldown = Setting(
        "SIWA_APPLE_JWKS_REFETCH_COOLDOWN_SECONDS", .seconds(0.1...3600), default: "30", readers: [.serve], files: [.serve],
        help: "least time between refetches for unknown `kid`s; an unknown `kid` inside it is answered 503 (Apple retries)",
        details: """
            So tokens with invented `kid`s cannot make siwa hammer Apple.
            """)
    public static let ingestWriters = Setting(
        "SIWA_INGEST_WRITERS", .integer(1...64), default: "1", readers: [.serve], files: [.serve],
        help: "group-commit writers (below SIWA_DATABASE_MAX_CONNECTIONS); each Apple user always goes to the same one",
        details: """
            Writer tasks commit verified notifications in batches (group commit).
            One writer takes every notification waiting into its next
            transaction: fewer, bigger commits answer sooner than several
            writers competing for the same cores and WAL flushes. Raise it
            only when PostgreSQL has cores to spare and the one writer's
            batches run full (SIWA_INGEST_MAX_BATCH).
            """)
    public static let ingestMaxBatch = Setting(
        "SIWA_INGEST_MAX_BATCH", .integer(1...1000), default: "64", readers: [.serve], files: [.serve],
        help: "most notifications committed in one transaction")
    public static let ingestTimeout = Setting(
        "SIWA_INGEST_TIMEOUT_SECONDS", .seconds(0.1...120), default: "10", readers: [.serve], files: [.serve],
        help: "answer 503 (Apple retries) if a notification is not committed by then")
    public static let onConsentRevoked = Setting(
        "SIWA_ON_CONSENT_REVOKED", .choice(["purge", "sign_out"]), default: "purge", readers: [.serve],
        files: [.serve],
        help: "`consent-revoked`: `purge` signs the user out and revokes their Apple tokens at once, and purges their data SIWA_CONSENT_REVOKED_PURGE_DELAY_DAYS later unless they sign in again; `sign_out` keeps their data",
        details: """
            TN3194 ("Respond to credential revoked notifications") asks: "Delete all \
            user-related account data, including: The token used for token revocation; Any \
            user-related data stored in your app servers; ..." and "Revert the client to an \
            unauthenticated state."
            - purge: status consent_revoked and the user's Apple tokens revoked and deleted \
            at once; the purge plan runs after the grace delay; a verified sign-in by the \
            user before then cancels it (audit row purge.cancelled, app event).
            - sign_out: for apps whose accounts live on without Apple (Apple was one login \
            among others): tokens revoked and deleted, data kept. This departs from TN3194.
            `account-delete`, `account-deleted` and DELETE /v1/users/{sub} always purge at \
            once. A refresh token Apple answers `invalid_grant` for only ends the session.
            """)
    public static let consentRevokedPurgeDelayDays = Setting(
        "SIWA_CONSENT_REVOKED_PURGE_DELAY_DAYS", .integer(0...30), default: "30", readers: [.serve], files: [.serve],
        help: "under SIWA_ON_CONSENT_REVOKED=purge, days a consent revocation's purge waits for the user to come back (`0`: at once); `siwa jobs run-now ID` runs one now",
        details: """
            At most 30: the one month that erasure requests are commonly held to. The \
            delay is siwa's choice: TN3194 asks that the data be deleted when the \
            notification comes, which `0` does. The \
            user's tokens go at once whatever the delay; the pending purge and its due time \
            show in `siwa jobs list`, GET /v1/users/{sub} and the admin page.
            """)
    public static let rejectionsPerMinute = Setting(
        "SIWA_REJECTIONS_PER_MINUTE", .integer(0...1_000_000), default: "6000", readers: [.serve], files: [.serve],
        help: "refused deliveries stored one by one per minute; the rest are counted (`siwa_rejections_unrecorded_total`, one summary row a minute)",
        details: """
            Refused bodies (bad tokens, junk) are rows of siwa.rejected_notifications. Past \
            the rate they are only counted: siwa_rejections_unrecorded_total in /metrics, \
            and one `over_rate_limit` row a minute with `occurrences`.
            """)
    public static let floodDelay = Setting(
        "SIWA_FLOOD_DELAY_SECONDS", .seconds(0...10), default: "1", readers: [.serve], files: [.serve],
        help: "during a flood of junk (refusals faster than SIWA_REJECTIONS_PER_MINUTE / 60 in a second, and 30 s after), each refusal's answer is held about this long (0.5 to 1.5 times; at most 4096 at once), so the flood cannot starve Apple's notifications, whose answers are never held; 0: never")
    public static let rejectionRetentionDays = Setting(
        "SIWA_REJECTION_RETENTION_DAYS", .integer(1...3650), default: "30", readers: [.worker], files: [.worker],
        help: "rows of `siwa.rejected_notifications` older than this are pruned",
        details: """
            The worker that leads maintenance prunes them, every hour (serve's role may \
            only insert them).
            """)

    // MARK: Sign-in and Apple's tokens (serve's /v1 API, the worker's validation and revocation)

    public static let appleTeamID = Setting(
        "SIWA_APPLE_TEAM_ID", .text, example: "ABCDE12345", readers: [.serve, .worker, .tokens, .transfer, .migrate],
        files: [.shared], setInExamples: true,
        help: "your Apple Developer Team ID (10 characters; Membership details in the developer account), the team of SIWA_APPLE_CLIENT_IDS: required by serve and migrate unless SIWA_APPLE_CLIENTS_FILE",
        details: """
            Apple's `sub` is scoped to a team: siwa keys each user by team and sub, so \
            serve needs the team its clients belong to, and `siwa migrate` the team of the \
            users a database holds from before siwa knew of teams. Sign-in (siwa serve's \
            /v1 API, the worker's token validation and revocation) is on when \
            SIWA_APPLE_KEY_ID, SIWA_APPLE_PRIVATE_KEY_FILE and \
            SIWA_TOKEN_ENCRYPTION_KEYS_FILE are set, with this team (the key's), off when \
            none is; some but not all stops start-up naming what is missing. The Team ID is \
            under Membership details in your account at developer.apple.com (10 upper-case \
            letters and digits).
            """)
    public static let appleKeyID = Setting(
        "SIWA_APPLE_KEY_ID", .text, example: "XYZ987WVU6", readers: [.serve, .worker, .tokens], files: [.shared],
        help: "the Key ID of the Sign in with Apple private key (Certificates, Identifiers & Profiles > Keys)",
        details: """
            Make the key at developer.apple.com: Certificates, Identifiers & Profiles > \
            Keys > +, give it a name, enable "Sign in with Apple", Configure it with your \
            primary App ID, then Continue and Register. The Key ID (10 characters) is on the \
            key's page and in the file's name, AuthKey_<Key ID>.p8.
            """)
    public static let applePrivateKeyFile = Setting(
        "SIWA_APPLE_PRIVATE_KEY_FILE", .path, example: "/etc/siwa/AuthKey_XYZ987WVU6.p8", readers: [.serve, .worker, .tokens],
        files: [.shared],
        help: "that key's `.p8` file (PKCS#8 PEM, P-256), readable by the service user only; it signs the client secret",
        details: """
            Download it from the key's page; Apple offers the download once only, so keep a \
            copy in your secret store. It must be readable by the service user only, and \
            serve and worker run as different users: install it mode 0600, owner root. A lost or leaked key: revoke it on the Keys page and make a new \
            one (new SIWA_APPLE_KEY_ID too).
            """)
    public static let tokenEncryptionKeysFile = Setting(
        "SIWA_TOKEN_ENCRYPTION_KEYS_FILE", .path, example: "/etc/siwa/token-keys", readers: [.serve, .worker, .tokens],
        files: [.shared],
        help: "the key ring that encrypts stored Apple tokens: lines `KEY_ID:BASE64_OF_32_BYTES` (`siwa tokens keygen`); the first encrypts, all decrypt",
        details: """
            Apple's refresh and access tokens are stored sealed (AES-256-GCM) under the \
            first key. Make a line with `siwa tokens keygen` and send it straight into the \
            file: it is a secret, never paste it into a ticket or a chat. Readable by the \
            service user only, as the .p8 key (mode 0600 and LoadCredential=; siwa warns at \
            start when others may read it). Without the ring the stored tokens cannot be \
            decrypted: back it up as you back up the database.
            To rotate: put a new `siwa tokens keygen` line FIRST and keep the old lines \
            below it, restart serve and worker, run `siwa tokens rekey` (it re-encrypts every \
            stored token under the first key; safe while they run), and remove the old line \
            only after a rekey run that reports no failure.
            """)
    public static let appleBaseURL = Setting(
        "SIWA_APPLE_BASE_URL", .url, default: "https://appleid.apple.com", readers: [.serve, .worker, .tokens], files: [.shared],
        help: "Apple's base URL: `<base>/auth/token` and `<base>/auth/revoke` (change only for a test double)")
    public static let clientSecretTTL = Setting(
        "SIWA_CLIENT_SECRET_TTL_SECONDS", .integer(60...15_777_000), default: "3600", readers: [.serve, .worker, .tokens],
        files: [.shared],
        help: "lifetime of the ES256 client secret siwa signs for Apple (cached, renewed before it expires; Apple allows up to 6 months)",
        details: """
            A leaked client secret works until it expires: there is no need for a long one, \
            siwa signs the next before the current one runs out.
            """)
    public static let appleRequestTimeout = Setting(
        "SIWA_APPLE_REQUEST_TIMEOUT_SECONDS", .seconds(0.5...120), default: "10", readers: [.serve, .worker, .tokens],
        files: [.shared],
        help: "one deadline for each call to Apple's token endpoints (connect, answer and body); past it sign-in answers 503")
    public static let signInRequires = Setting(
        "SIWA_SIGN_IN_REQUIRES", .choice(["code", "code_or_nonce", "token"]), default: "code", readers: [.serve],
        files: [.serve],
        help: "what POST /v1/sign-in needs beside the identity token: `code` (an authorization code, which Apple honours once), `code_or_nonce`, or `token` (the identity token alone; weaker)",
        details: """
            An identity token can be replayed until it expires; an authorization code is \
            single-use ("A single-use authorization code that's valid for five minutes", in \
            Apple's words), so with `code` a replayed token alone signs nobody in. A `nonce` \
            is the raw value the app made; siwa compares its SHA-256 (lower-case hex) with \
            the token's `nonce` claim, so the app sets the SHA-256 hex as the request's \
            nonce. Whatever this says, a token issued at or before the user's last \
            revocation, deletion, purge or ended session is refused (409 stale_identity_token).
            """)
    public static let refreshValidationHours = Setting(
        "SIWA_REFRESH_VALIDATION_HOURS", .integer(0...8760), default: "24", readers: [.serve, .worker, .tokens], files: [.shared],
        help: "each stored refresh token is checked with Apple once per this many hours (at least 24, Apple's limit), spread over the period; `0` turns validation off",
        details: """
            1 to 23 are refused: Apple asks that a refresh token be validated at most once a \
            day. The worker makes the calls; a token Apple answers `invalid_grant` for (a \
            revocation, or a password change) ends the user's session: the token is \
            deleted, the user stays active, nothing is purged.
            """)
    public static let appleRequestsPerSecond = Setting(
        "SIWA_APPLE_REQUESTS_PER_SECOND", .integer(0...10_000), default: "20", readers: [.worker], files: [.worker],
        help: "most calls to Apple per second for token validation and an app transfer's steps together (`0`: no cap)",
        details: """
            Spreads the checks so that many users do not become a burst. Validation and an \
            app transfer's jobs (`siwa transfer`) run on the one worker that leads \
            maintenance, and share one pacer, so this holds however many workers run.
            """)

    public static let validationInvalidGrantPausePercent = Setting(
        "SIWA_VALIDATION_INVALID_GRANT_PAUSE_PERCENT", .integer(1...100), default: "20", readers: [.worker, .tokens],
        files: [.worker],
        help: "validation pauses when more than this many of the last 100 answers were `invalid_grant` (`siwa tokens resume-validation` resumes it)",
        details: """
            An incident on Apple's side must not end every user's session at the validation \
            rate. The pause is logged at error, shown as siwa_validation_paused 1 in the \
            worker's /metrics (alert SiwaTokenValidationPaused) and audited; the user whose \
            answer tripped it keeps their session.
            """)

    // MARK: Worker (siwa worker; serve reads the lease and run time for /metrics)

    public static let purgePlan = Setting(
        "SIWA_PURGE_PLAN", .path, example: "/etc/siwa/purge-plan.json", readers: [.worker], files: [.worker],
        help: "the purge plan (JSON); without it only the built-in step runs, and the worker says so at start",
        details: """
            A JSON file of ordered steps run for each purged user \
            (deploy/purge-plan.example.json). Without it only the built-in step runs (erase \
            siwa's own personal data for the user). The plan names its secrets by variable \
            (at the end of this file) and holds none itself; user siwa-worker must be able \
            to read it (mode 0640, owner root, group siwa-worker), outside /home, /root and \
            /run/user, which the unit hides. SQL steps on siwa's own database run as \
            SIWA_PURGE_ROLE: GRANT that role what they do on the app's tables \
            (deploy/README.md, "The database"). Try a changed plan with `siwa worker --check-plan` before restarting \
            the worker.
            """)
    public static let workerConcurrency = Setting(
        "SIWA_WORKER_CONCURRENCY", .integer(1...256), default: "4", readers: [.worker], files: [.worker],
        help: "jobs run at once")
    public static let jobLease = Setting(
        "SIWA_JOB_LEASE_SECONDS", .seconds(1...86400), default: "60", readers: [.serve, .worker], files: [.shared],
        help: "a claimed job's lease, renewed every third of it while the job runs; an expired lease is rescued",
        details: """
            A job whose worker died is run again once its lease expires. serve reads it too, \
            for /metrics (siwa_jobs_running_overdue), so it is in siwa.env: both units must \
            agree on it.
            """)
    public static let jobMaxRun = Setting(
        "SIWA_JOB_MAX_RUN_SECONDS", .seconds(1...86400), default: "900", defaultDescription: "`900`, or the lease if longer",
        readers: [.serve, .worker], files: [.shared],
        help: "an attempt running longer is stopped and retried (its lease no longer renewed); at least the lease and every step's timeout",
        details: """
            The stopped attempt is retried after the backoff. serve reads it too, for \
            /metrics (siwa_jobs_running_overdue), so it is in siwa.env.
            """)
    public static let jobRetryBase = Setting(
        "SIWA_JOB_RETRY_BASE_SECONDS", .seconds(0.001...21600), default: "15", readers: [.worker], files: [.worker],
        help: "retry n waits base × 2^(n−1) plus up to 20% jitter, capped at 6 h",
        details: """
            Fractions allowed. With the defaults a failing step is retried after 15 s, \
            30 s, 1 min, ... and the job discarded after about 3½ days (25 attempts).
            """)
    public static let jobMaxAttempts = Setting(
        "SIWA_JOB_MAX_ATTEMPTS", .integer(1...1000), default: "25", readers: [.worker], files: [.worker],
        help: "attempts before a job is `discarded` (its error history kept)",
        details: """
            `siwa jobs retry ID` brings a discarded job back. Watch for discarded jobs: each \
            is a user whose data is not yet fully purged.
            """)
    public static let jobRetentionDays = Setting(
        "SIWA_JOB_RETENTION_DAYS", .days(0...3650), default: "30", readers: [.worker], files: [.worker],
        help: "completed and cancelled jobs are pruned after this (the audit trail stays)",
        details: """
            Fractions allowed; the audit trail keeps the proof of each purge.
            """)
    public static let workerPoll = Setting(
        "SIWA_WORKER_POLL_SECONDS", .seconds(0.05...600), default: "2", readers: [.worker], files: [.worker],
        help: "polling fallback; NOTIFY wakes the worker at once")
    public static let workerShutdownGrace = Setting(
        "SIWA_WORKER_SHUTDOWN_GRACE_SECONDS", .seconds(0...3600), default: "30", readers: [.worker], files: [.worker],
        help: "on SIGTERM, running jobs get this long to finish; the rest are released",
        details: """
            The released jobs go to another worker, or to this one when it starts again. \
            Keep it below the unit's TimeoutStopSec (60).
            """)

    // MARK: App events webhook (the worker delivers; `siwa webhooks` tests and replays)

    public static let appWebhookURL = Setting(
        "SIWA_APP_WEBHOOK_URL", .url, example: "https://app.internal/siwa/events", readers: [.worker, .webhooks],
        files: [.worker],
        help: "the app's backend endpoint that hears every event siwa records (Apple's notifications, sign-ins, deletions, purges), signed the Standard Webhooks way; unset: no event is delivered",
        details: """
            Each `siwa worker` turns delivery on (set) or off (unset) at start, for every \
            process that records events (siwa.app_webhook): give all workers the same \
            value. A delivery is a job (kind app_event, `siwa jobs list`): enqueued in the \
            transaction that records the event, retried with the jobs' backoff \
            (SIWA_JOB_RETRY_BASE_SECONDS, SIWA_JOB_MAX_ATTEMPTS), one user's events in \
            order. Only a 2xx counts; redirects are not followed. docs/app-events.md shows \
            how to verify a delivery.
            """)
    public static let appWebhookSecret = Setting(
        "SIWA_APP_WEBHOOK_SECRET", .text, example: "whsec_CHANGE-ME-make-one-with-siwa-webhooks-secret", readers: [.worker, .webhooks],
        files: [.worker], secret: true,
        help: "the deliveries' signing secret, `whsec_` + base64 of 24 to 64 random bytes (`siwa webhooks secret` makes one); required with SIWA_APP_WEBHOOK_URL",
        details: """
            The app's backend holds the same secret and checks webhook-signature with it. \
            It is a secret: keep it in worker.env (mode 0640) or a credential, never in \
            siwa.env, which serve reads too.
            """)
    public static let appWebhookSecretNext = Setting(
        "SIWA_APP_WEBHOOK_SECRET_NEXT", .text, example: "whsec_CHANGE-ME-the-next-secret", readers: [.worker, .webhooks],
        files: [.worker], secret: true,
        help: "during a rotation, the next secret: every delivery is then signed with both (two `v1,` signatures in webhook-signature)",
        details: """
            To rotate: set the new secret here and restart the workers; give it to the app; \
            once the app checks with it, move it to SIWA_APP_WEBHOOK_SECRET, unset this one \
            and restart the workers again.
            """)
    public static let appWebhookIncludeEmail = Setting(
        "SIWA_APP_WEBHOOK_INCLUDE_EMAIL", .choice(["false", "true"]), default: "false", readers: [.worker, .webhooks],
        files: [.worker],
        help: "`true`: Apple's email events carry the user's (relay) email address to the app; `false`: no delivery holds an email address",
        details: """
            Turn it on only if the app keeps its own mailer in step with email-enabled. A \
            user's purge erases the address from siwa's records, and deliveries made after \
            it carry none.
            """)
    public static let appWebhookTimeout = Setting(
        "SIWA_APP_WEBHOOK_TIMEOUT_SECONDS", .seconds(0.5...120), default: "10", readers: [.worker, .webhooks],
        files: [.worker],
        help: "one deadline for each delivery (connect, answer and body); past it the attempt failed and is retried")

    // MARK: Audit reports

    public static let purgeSLAHours = Setting(
        "SIWA_PURGE_SLA_HOURS", .integer(1...8760), default: "72", readers: [.migrate], files: [.migrate],
        help: "a purge still pending this long after it was requested is listed by `siwa audit summary` and the view siwa.attention",
        details: """
            `siwa migrate` records it in the database (siwa.report_settings), where the \
            views read it, so psql, `siwa audit` and the admin page all apply the same one: \
            run `siwa migrate` again after changing it. Apple and data-protection law expect \
            a deletion to be prompt.
            """)

    // MARK: Deletion receipts (the worker signs them; serve publishes the public keys)

    public static let receiptKeyFile = Setting(
        "SIWA_RECEIPT_KEY_FILE", .path, example: "/etc/siwa/receipt-key.pem", readers: [.worker, .receipts], files: [.worker],
        help: "the key that signs deletion receipts (PKCS#8 PEM, P-256: `siwa receipts keygen`), the worker's alone; with SIWA_RECEIPT_ISSUER it turns receipts on, and without both the worker signs none and says so at start",
        details: """
            When a purge completes, the worker signs a receipt (a JWS, ES256) saying what \
            was done and when, and stores it in siwa.deletion_receipts in the transaction \
            that completes the purge: the evidence for App Review or for the person who \
            asked for erasure (`siwa receipts show SUB`). Make the key with \
            `(umask 077; siwa receipts keygen > /etc/siwa/receipt-key.pem)` (mode 0600, \
            owner root). siwa serve never gets it: it publishes \
            the public keys only (SIWA_RECEIPT_JWKS_FILE). Keep a backup: receipts already \
            signed stay verifiable with the public key set alone.
            """)
    public static let receiptIssuer = Setting(
        "SIWA_RECEIPT_ISSUER", .text, example: "https://siwa.example.com", readers: [.worker, .receipts], files: [.worker],
        help: "the receipts' `iss`: who vouches for the deletions, e.g. the URL where `/.well-known/siwa-receipts.json` is served",
        details: """
            Set with SIWA_RECEIPT_KEY_FILE (both or neither). Printable text, at most 200 \
            characters; a URL lets a third party find the key set.
            """)
    public static let receiptJWKSFile = Setting(
        "SIWA_RECEIPT_JWKS_FILE", .path, example: "/etc/siwa/receipt-keys.json", readers: [.serve, .receipts], files: [.serve],
        help: "the receipts' public key set, as `siwa receipts jwks` prints it; serve publishes it at `/.well-known/siwa-receipts.json` (unset: 404)",
        details: """
            Public keys only, so it is no secret (mode 0644). Make it where the private key \
            is: `siwa receipts jwks > receipt-keys.json`; after a key rotation keep the old \
            keys in it (`siwa receipts jwks --include receipt-keys.json`), so receipts \
            signed before still verify. serve reads it at start.
            """)

    // MARK: Erasure ledger (the worker appends every completed erasure outside the database)

    public static let erasureLedgerDir = Setting(
        "SIWA_ERASURE_LEDGER_DIR", .path, default: "/var/lib/siwa/erasures", readers: [.worker], files: [.worker],
        help: "where the worker appends every completed erasure (sub, job id, time, receipt id; one signed JSON line each, synced before the purge commits), so a restored backup cannot bring erased users back (`siwa erasures reapply`)",
        details: """
            One file per worker process. Created at start if missing (mode 0700); a \
            directory the worker cannot write stops it at start. siwa-worker.service \
            gives it /var/lib/siwa/erasures (StateDirectory=). Back it up apart from the \
            database (deploy/README.md, "Restoring a backup"): after a restore, `siwa \
            erasures reapply /var/lib/siwa/erasures/*` purges again every sub the backup \
            still holds. Lines are signed with the receipt key (SIWA_RECEIPT_KEY_FILE); \
            with receipts off they are unsigned (the worker says so at start) and reapply \
            takes them only with --accept-unsigned.
            """)

    // MARK: Audit chain (the worker seals the log and logs its head)

    public static let auditVerifyMinutes = Setting(
        "SIWA_AUDIT_VERIFY_MINUTES", .integer(0...10080), default: "60", readers: [.worker], files: [.worker],
        help: "the worker leading maintenance walks the whole audit chain (as `siwa audit verify`) when it takes the lead and this often; 0: never",
        details: """
            Its result is on the worker's /metrics: siwa_audit_chain_verified_seq (the verified head) and \
            siwa_audit_chain_broken (the alert SiwaAuditChainBroken); a break is also logged at critical. \
            Each walk reads the whole log, at most 10,000 rows a second so that it never takes a core \
            from the jobs (a million rows in under two minutes): for a trail of tens of millions of rows, \
            lengthen it (the next walk starts this long after one ends).
            """)

    public static let auditHeadLogMinutes = Setting(
        "SIWA_AUDIT_HEAD_LOG_MINUTES", .integer(1...10080), default: "60", readers: [.worker], files: [.worker],
        help: "the worker logs the audit chain's head (`Audit chain head`, head=SEQ:HASH) at start and this often",
        details: """
            Keep the heads somewhere the database's superuser cannot rewrite (the journal \
            shipped off the machine): `siwa audit verify --head SEQ:HASH` proves such a head \
            is still in the chain, which catches a cut tail or a chain rewritten from an edit on.
            """)

    // MARK: Logging (every command)

    public static let logFormat = Setting(
        "SIWA_LOG_FORMAT", .choice(["text", "json"]), default: "text", readers: Set(Setting.Reader.allCases), files: [.shared],
        help: "one line per event: `text` is logfmt (`ts=... level=info logger=siwa.serve msg=... key=value`), `json` one JSON object",
        details: """
            Both carry the same fields; a value with a space or a quote is quoted and \
            escaped in logfmt, so no value forges a key or a line. With tracing on \
            (OTEL_EXPORTER_OTLP_ENDPOINT) a line logged inside a span also has \
            `trace_id` and `span_id`. `json` for log shippers reading the journal.
            """)
    public static let logLevel = Setting(
        "SIWA_LOG_LEVEL", .choice(["trace", "debug", "info", "notice", "warning", "error", "critical"]), default: "info",
        readers: Set(Setting.Reader.allCases), files: [.shared],
        help: "the least severe level logged")

    /// The settings by topic, in the order the docs list them; the env
    /// files have a `# ---- title --` line for each.
    // MARK: Admin listener (siwa serve)

    public static let adminHTTPHost = Setting(
        "SIWA_ADMIN_HTTP_HOST", .text, default: "127.0.0.1", readers: [.serve], files: [.serve],
        help: "the admin listener's address (`/admin`: the admins' JSON routes and page, opened by admin keys only); keep it on loopback and reach it through an ssh tunnel",
        details: """
            A listener of its own, apart from SIWA_HTTP_PORT: the public port that Apple \
            reaches has no /admin route at all. From an admin's machine: \
            `ssh -N -L 8081:127.0.0.1:8081 siwa-host`, then open http://127.0.0.1:8081/admin \
            with an admin key (`siwa api-keys create NAME --scope admin`) as the password.
            """)
    public static let adminHTTPPort = Setting(
        "SIWA_ADMIN_HTTP_PORT", .text, default: "8081", readers: [.serve], files: [.serve],
        help: "the admin listener's port; `off`: no admin listener; 0: any free port (logged)",
        details: """
            Two serve processes on one host need two ports, or `off` for all but one.
            """)
    public static let eventsFeedRetentionDays = Setting(
        "SIWA_EVENTS_FEED_RETENTION_DAYS", .days(1...3650), default: "30", readers: [.serve], files: [.serve],
        help: "`GET /v1/events` answers the app events siwa recorded within this many days; a cursor whose next event is older is answered 410 `cursor_expired`",
        details: """
            A window over the audit trail, which keeps every event for good: nothing is \
            deleted, and `siwa webhooks replay` (an admin) reaches further back. It bounds \
            how much of users' history an app key can read, and how far back a backend \
            may fall and still catch up by itself (docs/app-events.md). Fractions allowed.
            """)
    public static let adminAuthFailuresPerMinute = Setting(
        "SIWA_ADMIN_AUTH_FAILURES_PER_MINUTE", .integer(1...10_000), default: "10", readers: [.serve], files: [.serve],
        help: "failed admin authentications (a wrong or revoked key, an app key) allowed per key prefix per minute, and four times that per source address; past either, that key (or the address) is answered 429 with Retry-After until the minute is over",
        details: """
            Counted in /metrics: siwa_admin_auth_failures_total{reason} and \
            siwa_admin_auth_refused_total (the 429s). A request without credentials (a \
            browser's first) is counted (reason missing) but not held against anyone. \
            Behind an ssh tunnel every admin comes from 127.0.0.1: one admin's typos lock \
            out their own key (its `siwa_<prefix>`; malformed keys share one count), and \
            the others still get in until the address's limit. The table of counts has a \
            fixed size (4096), so a flood from many addresses costs no memory.
            """)

    // MARK: API listener (siwa serve's /v1, for the app's backend)

    public static let apiHTTPHost = Setting(
        "SIWA_API_HTTP_HOST", .text, default: "127.0.0.1", readers: [.serve], files: [.serve],
        help: "the API listener's address (`/v1`: sign-in, users, deletion, each with an API key), which the app's backend calls; loopback, or an address on the private network the backend's hosts reach",
        details: """
            A listener of its own, apart from SIWA_HTTP_PORT: the public port, which the \
            reverse proxy exposes to the internet, has no /v1 route at all. With the \
            backend on another host, set an address of the private network here and let \
            only the backend's hosts reach the port (a firewall rule); never put it behind \
            the public proxy. Bound only when sign-in is on (SIWA_TOKEN_ENCRYPTION_KEYS_FILE \
            and the Apple key settings).
            """)
    public static let apiHTTPPort = Setting(
        "SIWA_API_HTTP_PORT", .text, default: "8082", readers: [.serve], files: [.serve],
        help: "the API listener's port; `off`: no /v1 in this process even with sign-in on; 0: any free port (logged)",
        details: """
            Two serve processes on one host need two ports, or `off` for all but one.
            """)

    // MARK: siwa serve's metrics listener

    public static let metricsHTTPHost = Setting(
        "SIWA_METRICS_HTTP_HOST", .text, default: "127.0.0.1", readers: [.serve], files: [.serve],
        help: "the metrics listener's address: `/metrics` (Prometheus text), `/healthz` and `/readyz`; loopback, or an address on the private network Prometheus scrapes from",
        details: """
            A listener of its own, apart from SIWA_HTTP_PORT: the public port, which the \
            reverse proxy exposes to the internet, has no /metrics route. It has no \
            authentication and nothing but these three routes: let only Prometheus's \
            hosts reach it (a firewall rule), as for the worker's SIWA_WORKER_METRICS_PORT.
            """)
    public static let metricsHTTPPort = Setting(
        "SIWA_METRICS_HTTP_PORT", .text, default: "8083", readers: [.serve], files: [.serve],
        help: "the metrics listener's port; `off`: no listener (no /metrics from serve); 0: any free port (logged)",
        details: """
            Two serve processes on one host need two ports, or `off` for all but one.
            """)

    // MARK: The worker's health and metrics listener (siwa worker)

    public static let workerMetricsHost = Setting(
        "SIWA_WORKER_METRICS_HOST", .text, default: "127.0.0.1", readers: [.worker], files: [.worker],
        help: "the worker's listener address: `/healthz`, `/readyz` (its database reachable) and `/metrics` (Prometheus text); keep it on loopback",
        details: """
            Scrape it from Prometheus on the same host (or through an ssh tunnel): it has \
            no authentication, and nothing but these three routes.
            """)
    public static let workerMetricsPort = Setting(
        "SIWA_WORKER_METRICS_PORT", .text, default: "9091", readers: [.worker], files: [.worker],
        help: "the worker's listener port; `off`: no listener; 0: any free port (logged)",
        details: """
            Two workers on one host need two ports, or `off` for all but one (each reports \
            its own counters, so scrape them all).
            """)

    public static let sections: [(title: String, settings: [Setting])] = [
        ("database", [databaseURL, migrateDatabaseURL, serveRole, workerRole, purgeRole, databaseMaxConnections, migrationsDir]),
        ("apps and teams", [appleClientIDs, appleTeamID, appleWebClientIDs, appleClientsFile]),
        ("notifications and HTTP", [httpHost, httpPort, httpIdleTimeout, maxBodyBytes]),
        ("API listener (/v1)", [apiHTTPHost, apiHTTPPort, eventsFeedRetentionDays]),
        ("metrics listener", [metricsHTTPHost, metricsHTTPPort]),
        ("Apple's public keys (JWKS)", [appleJWKSURL, jwksRefresh, jwksRefetchCooldown]),
        ("ingest (group commit)", [ingestWriters, ingestMaxBatch, ingestTimeout]),
        ("account events", [onConsentRevoked, consentRevokedPurgeDelayDays]),
        ("refused deliveries", [rejectionsPerMinute, floodDelay, rejectionRetentionDays]),
        ("admin listener", [adminHTTPHost, adminHTTPPort, adminAuthFailuresPerMinute]),
        ("sign-in and Apple's tokens", [appleKeyID, applePrivateKeyFile, tokenEncryptionKeysFile,
                                        appleBaseURL, clientSecretTTL, appleRequestTimeout, signInRequires,
                                        refreshValidationHours, appleRequestsPerSecond,
                                        validationInvalidGrantPausePercent]),
        ("purge jobs", [purgePlan, workerConcurrency, jobLease, jobMaxRun, jobRetryBase, jobMaxAttempts,
                        jobRetentionDays, workerPoll, workerShutdownGrace]),
        ("worker metrics listener", [workerMetricsHost, workerMetricsPort]),
        ("app events webhook", [appWebhookURL, appWebhookSecret, appWebhookSecretNext, appWebhookIncludeEmail,
                                appWebhookTimeout]),
        ("audit reports", [purgeSLAHours]),
        ("deletion receipts", [receiptKeyFile, receiptIssuer, receiptJWKSFile]),
        ("erasure ledger", [erasureLedgerDir]),
        ("audit chain", [auditHeadLogMinutes, auditVerifyMinutes]),
        ("logging", [logFormat, logLevel]),
    ]

    /// All of them, in the order the docs list them.
    public static let all: [Setting] = sections.flatMap { $0.settings }

    /// `SIWA_*` names that belong to siwa's development tools, not to a
    /// command (scripts/testdb.sh, the tests, the bench, siwa-demo), or to
    /// its build (SIWA_GIT_COMMIT, which the Makefile writes into the build stamp).
    public static let toolPrefixes = ["SIWA_PG_", "SIWA_TEST_", "SIWA_BENCH_", "SIWA_DEMO_", "SIWA_GIT_"]
}
