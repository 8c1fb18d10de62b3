import Logging
import NIOCore
import PostgresNIO

/// The lock that elects `siwa worker`'s maintenance leader: a session-level
/// advisory lock (`pg_try_advisory_lock`, per database, as River elects its
/// leader), held on a connection of its own. Not a pooled one: a session
/// lock lives as long as its connection, and a pool would lend that
/// connection (and the lock) to whatever statement came next, or keep it
/// after the leader stopped. Whoever holds it holds it until its connection
/// ends: a process killed (kill -9), the network gone, the server
/// restarted; PostgreSQL then releases it, and the next try of another
/// worker wins.
///
/// Every wait here has a deadline: the connect, each statement.
public struct MaintenanceLock: Sendable {
    /// The advisory lock's key ("SIWA" 0020; the migrator's is 0001, the
    /// sealer's per-transaction lock 0009).
    public static let key: Int64 = 0x5157_4100_0020
    /// What `pg_stat_activity` shows for the lock's session.
    public static let applicationName = "siwa-maintenance-lock"
    /// The longest a connect or a statement on the lock's connection may take.
    public static let timeout: Duration = .seconds(5)

    let database: DatabaseConfiguration
    let logger: Logger

    public init(database: DatabaseConfiguration, logger: Logger) {
        self.database = database
        self.logger = logger
    }

    /// Keepalives on the lock's session, so that the server finds a dead
    /// peer (a network gone, no FIN) in about 25 s instead of the system's
    /// default of hours, and releases the lock for another worker. The
    /// leader checks its side more often than that (`MaintenanceLeader`), so
    /// it stops before the server lets another worker in. A statement
    /// timeout ends any statement the client stopped waiting for.
    static let sessionParameters = [
        ("application_name", applicationName),
        ("tcp_keepalives_idle", "10"), ("tcp_keepalives_interval", "5"), ("tcp_keepalives_count", "3"),
        ("statement_timeout", "5s"),
    ]

    /// A new connection for the lock, within `timeout`. A connection that
    /// comes up after the deadline is closed, never left open.
    public func connect() async throws -> PostgresConnection {
        let configuration = try database.connectionConfiguration(extraParameters: Self.sessionParameters)
        let result = OneShot<PostgresConnection>()
        let logger = logger
        let attempt = Task {
            do {
                let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
                if !result.completeIfFirst(.success(connection)) { await Self.close(connection) }
            } catch {
                result.complete(.failure(error))
            }
        }
        let timer = Task {
            try await Task.sleep(for: Self.timeout)
            result.complete(.failure(TimeLimitExceeded(seconds: Self.seconds)))
            attempt.cancel()
        }
        defer { timer.cancel() }
        return try await result.wait()
    }

    /// Tries the lock on `connection`; true: this session holds it now (and
    /// until the connection ends). Throws if the connection failed or gave
    /// no answer in time: the caller closes it.
    public static func tryLock(on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        try await withTimeLimit(seconds: seconds) {
            try await connection.query("SELECT pg_try_advisory_lock(\(key))", logger: logger)
                .collect().first?.decode(Bool.self) == true
        }
    }

    /// A round trip on the lock's connection: while it answers, the session
    /// (and so the lock) is alive. Throws when it does not, in time.
    public static func check(_ connection: PostgresConnection, logger: Logger) async throws {
        _ = try await withTimeLimit(seconds: seconds) {
            try await connection.query("SELECT 1", logger: logger).collect().count
        }
    }

    /// Closes the lock's connection (the server ends the session, and with
    /// it the lock). Awaited: a connection must be closed before it is let go.
    public static func close(_ connection: PostgresConnection) async {
        try? await connection.close()
    }

    static var seconds: Double { Double(timeout.components.seconds) }
}
