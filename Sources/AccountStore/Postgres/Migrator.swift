import Crypto
import Foundation
import Logging
import PostgresNIO

/// One numbered SQL file from `sql/`.
public struct Migration: Sendable, Equatable {
    public let version: Int
    public let name: String
    public let sql: String
    public var checksum: String { SHA256.hash(data: Data(sql.utf8)).hexLowercased }
}

public enum MigrationError: Error, CustomStringConvertible, Sendable {
    case directoryNotFound(String)
    case badFileName(String)
    case duplicateVersion(Int)
    case editedAfterApply(version: Int, name: String)
    case unknownApplied(version: Int, name: String)
    case pending([String])

    public var description: String {
        switch self {
        case .directoryNotFound(let path): "migrations directory not found: \(path) (set SIWA_MIGRATIONS_DIR)"
        case .badFileName(let name): "migration file \(name) must be named NNN_description.sql"
        case .duplicateVersion(let version): "two migration files have the number \(version)"
        case .editedAfterApply(let version, let name):
            "migration \(version) (\(name)) was changed after it was applied; never edit an applied migration, add a new one"
        case .unknownApplied(let version, let name):
            "the database has migration \(version) (\(name)) that this siwa does not know; is this an older binary?"
        case .pending(let names): "the database schema is behind (pending: \(names.joined(separator: ", "))); run `siwa migrate`"
        }
    }
}

/// Applies `sql/NNN_*.sql` in order, each in its own transaction, and records
/// each with its checksum in `siwa.schema_migrations`. An advisory lock keeps
/// two `siwa migrate` runs from interleaving.
public struct Migrator: Sendable {
    public let migrations: [Migration]
    /// The team the rows of a database migrated before sql/024 belong to
    /// (siwa keys users by team and sub since): the one team siwa served.
    /// Passed to the migrations as the session setting
    /// `siwa.existing_rows_team`; nil refuses sql/024 on a database that
    /// holds users.
    public var existingRowsTeam: String?
    static let lockKey: Int64 = 0x5157_4100_0001

    public init(migrations: [Migration]) { self.migrations = migrations.sorted { $0.version < $1.version } }

    public init(directory: URL) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw MigrationError.directoryNotFound(directory.path)
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") }
        var seen = Set<Int>()
        var migrations: [Migration] = []
        for file in files {
            guard let version = Int(file.prefix(while: \.isNumber)), file.first?.isNumber == true else {
                throw MigrationError.badFileName(file)
            }
            guard seen.insert(version).inserted else { throw MigrationError.duplicateVersion(version) }
            let sql = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            migrations.append(Migration(version: version, name: String(file.dropLast(4)), sql: sql))
        }
        self.init(migrations: migrations)
    }

    /// Where the SQL files are: `SIWA_MIGRATIONS_DIR`, else `share/siwa/sql`
    /// beside the binary's prefix (an installed siwa: `/usr/bin/siwa` reads
    /// `/usr/share/siwa/sql`, as `make install` and the Debian package lay
    /// them out), else the source tree's `sql/` (development and tests).
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let dir = environment["SIWA_MIGRATIONS_DIR"], !dir.isEmpty { return URL(fileURLWithPath: dir) }
        let installed = executablePath().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("share/siwa/sql")
        if FileManager.default.fileExists(atPath: installed.path) { return installed }
        // Sources/AccountStore/Postgres/Migrator.swift -> repository root
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("sql")
    }

    /// The running binary, symlinks resolved. Linux: /proc/self/exe, which is
    /// right however siwa was started (argv[0] is only `siwa` when found on
    /// PATH); elsewhere argv[0].
    private static func executablePath() -> URL {
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            return URL(fileURLWithPath: path)
        }
        return URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath()
    }

    /// Apply what is pending; returns the names applied.
    @discardableResult
    public func migrate(client: PostgresClient, logger: Logger) async throws -> [String] {
        // Guarded: a server restart under `siwa migrate` ends it with an
        // error instead of a hang (see GuardedConnection.swift).
        try await client.withGuardedConnection { [self] connection in
            try await connection.query("SELECT pg_advisory_lock(\(Self.lockKey))", logger: logger)
            try await connection.query("SELECT set_config('siwa.existing_rows_team', \(existingRowsTeam ?? ""), false)",
                                       logger: logger)
            do {
                let applied = try await bootstrapAndCheck(connection, logger: logger)
                var done: [String] = []
                for migration in migrations where applied[migration.version] == nil {
                    try await apply(migration, on: connection, logger: logger)
                    logger.info("Applied migration", metadata: ["migration": "\(migration.name)"])
                    done.append(migration.name)
                }
                try await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                return done
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                throw error
            }
        }
    }

    /// One migration and its record, in one transaction.
    private func apply(_ migration: Migration, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.guardedTransaction(logger: logger) {
            for statement in SQLScript.statements(migration.sql) {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            try await connection.query("""
                INSERT INTO siwa.schema_migrations (version, name, checksum)
                VALUES (\(migration.version), \(migration.name), \(migration.checksum))
                """, logger: logger)
        }
    }

    /// Throws unless every known migration is applied unchanged (start-up check of `serve` and `worker`).
    public func checkUpToDate(client: PostgresClient, logger: Logger) async throws {
        let applied = try await appliedMigrations(client: client, logger: logger)
        try verify(applied: applied)
        let pending = migrations.filter { applied[$0.version] == nil }.map(\.name)
        if !pending.isEmpty { throw MigrationError.pending(pending) }
    }

    /// serve and worker at start: returns once every known migration is
    /// applied unchanged. A schema that is behind (an upgrade brought a
    /// migration `siwa migrate` has not applied yet) is waited for: a
    /// warning saying what is pending and what to run, then the check
    /// again after `wait`'s next pause, until `wait.deadline` (then it
    /// throws `.pending`, as before). A schema ahead of this binary or
    /// edited, a database siwa never migrated (no migration applied: a
    /// setup step missed, not an upgrade under way), or one that cannot be
    /// read throws at once: no wait fixes those. `sleep` is the caller's,
    /// so that a shutdown ends it.
    public func waitUntilUpToDate(client: PostgresClient, logger: Logger, wait: MigrationWait = MigrationWait(),
                                  sleep: @Sendable (Duration) async throws -> Void) async throws {
        let started = ContinuousClock.now
        var attempt = 0
        while true {
            let applied = try await appliedMigrations(client: client, logger: logger)
            try verify(applied: applied)
            let names = migrations.filter { applied[$0.version] == nil }.map(\.name)
            if names.isEmpty {
                if attempt > 0 { logger.notice("The database schema is up to date: starting") }
                return
            }
            if applied.isEmpty { throw MigrationError.pending(names) }
            let pause = wait.pause(after: attempt)
            guard ContinuousClock.now + pause - started <= wait.deadline else { throw MigrationError.pending(names) }
            logger.warning("The database schema is behind this siwa: waiting for `siwa migrate` (run it as the schema's owner, SIWA_MIGRATE_DATABASE_URL)",
                           metadata: ["pending": "\(names.joined(separator: ","))", "retry_in_seconds": "\(pause.components.seconds)"])
            wait.onWaiting?(names)
            try await sleep(pause)
            attempt += 1
        }
    }

    public func appliedMigrations(client: PostgresClient, logger: Logger) async throws -> [Int: (name: String, checksum: String)] {
        let exists = try await client.guardedQuery("SELECT to_regclass('siwa.schema_migrations') IS NOT NULL", logger: logger)
        guard try exists.first?.decode(Bool.self) == true else { return [:] }
        var applied: [Int: (name: String, checksum: String)] = [:]
        let rows = try await client.guardedQuery("SELECT version, name, checksum FROM siwa.schema_migrations", logger: logger)
        for row in rows {
            let (version, name, checksum) = try row.decode((Int, String, String).self)
            applied[version] = (name, checksum)
        }
        return applied
    }

    private func bootstrapAndCheck(_ connection: PostgresConnection, logger: Logger) async throws -> [Int: (name: String, checksum: String)] {
        // siwa's own bookkeeping, created by the migrator itself (never by `serve`).
        try await connection.query("CREATE SCHEMA IF NOT EXISTS siwa", logger: logger)
        try await connection.query("""
            CREATE TABLE IF NOT EXISTS siwa.schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                checksum text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """, logger: logger)
        var applied: [Int: (name: String, checksum: String)] = [:]
        let rows = try await connection.query("SELECT version, name, checksum FROM siwa.schema_migrations", logger: logger)
        for try await (version, name, checksum) in rows.decode((Int, String, String).self) {
            applied[version] = (name, checksum)
        }
        try verify(applied: applied)
        return applied
    }

    private func verify(applied: [Int: (name: String, checksum: String)]) throws {
        let known = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
        for (version, record) in applied.sorted(by: { $0.key < $1.key }) {
            guard let migration = known[version] else { throw MigrationError.unknownApplied(version: version, name: record.name) }
            guard migration.checksum == record.checksum else {
                throw MigrationError.editedAfterApply(version: version, name: record.name)
            }
        }
    }
}

/// How long serve and the worker wait for a pending migration: pauses
/// doubling from `firstPause` up to `longestPause` between checks, and at
/// most `deadline` in all. Under systemd the unit's TimeoutStartSec= (5
/// minutes) ends the wait sooner, and the restarted unit waits again.
public struct MigrationWait: Sendable {
    public var firstPause: Duration = .seconds(1)
    public var longestPause: Duration = .seconds(30)
    public var deadline: Duration = .seconds(30 * 60)
    /// Told the pending migrations at each check that finds some (serve and
    /// the worker put them in systemd's STATUS=, which `systemctl status` shows).
    public var onWaiting: (@Sendable (_ pending: [String]) -> Void)?

    public init() {}

    public init(firstPause: Duration, longestPause: Duration, deadline: Duration) {
        self.firstPause = firstPause
        self.longestPause = longestPause
        self.deadline = deadline
    }

    /// The pause after the `attempt`th check (0 first): doubled each time, capped.
    public func pause(after attempt: Int) -> Duration {
        var pause = firstPause
        for _ in 0..<min(attempt, 16) where pause < longestPause { pause *= 2 }
        return min(pause, longestPause)
    }
}
