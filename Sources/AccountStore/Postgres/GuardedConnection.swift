import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// An error for logs and the audit trail, without values: a PSQLError's
/// reflection can quote a failing row, and siwa's rows carry email
/// addresses. (The guarded calls rethrow the statement's own error, never
/// PostgresNIO's PostgresTransactionError wrapper.)
public func safeDescription(_ error: any Error) -> String {
    guard let error = error as? PSQLError else { return "\(type(of: error))" }
    return "PSQLError \(error.code) sqlstate \(error.serverInfo?[.sqlState] ?? "-")"
}

/// No connection came from the pool within the wait a request allows
/// (`withGuardedConnection(leaseWithin:)`): the database is down or every
/// connection is busy. Nothing was sent.
public struct NoConnectionWithin: Error, Sendable, CustomStringConvertible {
    public let limit: Duration
    public var description: String { "no database connection within \(limit)" }
}

extension Duration {
    /// How long a request waits for a database connection before it is
    /// answered 503: well inside an HTTP client's patience.
    public static let requestLease: Duration = .seconds(5)
}

/// Who got there first: the lease (the statement runs) or the deadline (the
/// caller is told no connection came); never both.
final class LeaseRace: Sendable {
    private enum State { case waiting, leased, expired }
    private let state = Mutex(State.waiting)

    /// The lease came: true if the deadline had not passed.
    func leased() -> Bool { state.withLock { if $0 == .waiting { $0 = .leased }; return $0 == .leased } }
    /// The deadline passed: true if no lease had come.
    func expired() -> Bool { state.withLock { if $0 == .waiting { $0 = .expired }; return $0 == .expired } }
}

/// The connection closed under a statement (the server restarted or the
/// network dropped); the statement's effect is unknown unless it committed.
public struct ConnectionClosed: Error, Sendable, CustomStringConvertible {
    public var description: String { "the database connection closed" }
}

// Why this exists: PostgresNIO (1.33) hands each query to the connection's
// channel without a promise for the write itself. On a connection that has
// just closed (the server restarted between two statements of a
// transaction, or `withTransaction`'s own ROLLBACK after the connection
// died) the write is dropped and the caller waits forever. Found by the
// worker's database-restart fault test: jobs hung in ROLLBACK. So every
// statement siwa runs on a leased connection goes through
// `withGuardedConnection`, whose wait also ends when the connection closes.

extension PostgresClient {
    /// `body` on a leased connection; fails with `ConnectionClosed` as soon as
    /// the connection closes, even if PostgresNIO never answers `body`'s query.
    /// Consume query results inside `body`.
    ///
    /// `leaseWithin` bounds the wait for a connection. A request's statement
    /// passes `.requestLease`: while the database is down, the pool keeps a
    /// lease waiting until its circuit breaker trips, a minute after the
    /// first failed connect, so without it the request would hang that long
    /// instead of answering 503. (The worker's statements wait: a full pool
    /// frees up as its jobs finish.)
    public func withGuardedConnection<T: Sendable>(
        leaseWithin: Duration? = nil,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        guard let leaseWithin else {
            return try await withConnection { connection in try await Self.guarded(connection, body) }
        }
        let lease = LeaseRace()
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await self.withConnection { connection in
                    guard lease.leased() else { throw NoConnectionWithin(limit: leaseWithin) }
                    return try await Self.guarded(connection, body)
                }
            }
            group.addTask {
                try await Task.sleep(for: leaseWithin)
                if lease.expired() { throw NoConnectionWithin(limit: leaseWithin) }
                return nil
            }
            while let next = try await group.next() {
                if let value = next {
                    group.cancelAll()
                    return value
                }
            }
            throw CancellationError()
        }
    }

    /// One statement on a guarded connection, its rows collected.
    @discardableResult
    public func guardedQuery(_ query: PostgresQuery, leaseWithin: Duration? = nil, logger: Logger) async throws -> [PostgresRow] {
        try await withGuardedConnection(leaseWithin: leaseWithin) { connection in
            try await connection.query(query, logger: logger).collect()
        }
    }

    /// One prepared statement on a guarded connection, its rows decoded.
    /// Prepared once per connection (PostgresNIO keeps it by the type's
    /// name), then each call sends only Bind and Execute: no parse, no
    /// plan lookup and no row description per call. For the statements of
    /// every request (the API key, the sign-in's two calls).
    public func guardedExecute<Statement: PostgresPreparedStatement>(_ statement: Statement, leaseWithin: Duration? = nil,
                                                                     logger: Logger) async throws
        -> [Statement.Row] where Statement.Row: Sendable {
        try await withGuardedConnection(leaseWithin: leaseWithin) { connection in
            try await connection.rows(of: statement, logger: logger)
        }
    }

    /// `guardedExecute` between BEGIN and COMMIT: for a write whose rows are
    /// answered to someone outside (Apple's 200, a sign-in's user id).
    /// PostgresNIO ends a statement's rows at CommandComplete, before the
    /// commit of an implicit transaction (at Sync) is known to have
    /// happened: a statement run alone can hand back its rows and then be
    /// rolled back (a database shutdown in between does it). COMMIT's own
    /// completion is the commit.
    public func guardedCommittedExecute<Statement: PostgresPreparedStatement>(_ statement: Statement, logger: Logger) async throws
        -> [Statement.Row] where Statement.Row: Sendable {
        try await withGuardedTransaction(logger: logger) { connection in
            try await connection.rows(of: statement, logger: logger)
        }
    }

    /// BEGIN, `body`, COMMIT on a guarded connection; ROLLBACK on error,
    /// unless the connection is gone (the server rolls back by itself then).
    public func withGuardedTransaction<T: Sendable>(
        leaseWithin: Duration? = nil,
        logger: Logger,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withGuardedConnection(leaseWithin: leaseWithin) { connection in
            try await connection.guardedTransaction(logger: logger) { try await body(connection) }
        }
    }

    private static func guarded<T: Sendable>(
        _ connection: PostgresConnection,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        let result = OneShot<T>()
        // A task of its own, so the wait can end while a dropped query never returns.
        let work = Task {
            do { result.complete(.success(try await body(connection))) } catch { result.complete(.failure(error)) }
        }
        let unwatch = ConnectionCloseWatch.shared.watch(connection) {
            // The outcome of `body` is unknown now (a COMMIT may have landed
            // just before the close); callers treat this as "maybe done".
            result.complete(.failure(ConnectionClosed()))
            work.cancel()
        }
        defer { unwatch() }
        let closing = Atomic<Bool>(false)
        do {
            return try await withTaskCancellationHandler {
                try await result.wait()
            } onCancel: {
                // The wait ends now, and the connection goes back to the pool, so
                // it must not carry on with `body`'s half-done work (an open
                // transaction would swallow the next user's statements): close it;
                // the server rolls back, the pool drops it.
                closing.store(true, ordering: .sequentiallyConsistent)
                work.cancel()
                connection.close().whenComplete { _ in }
            }
        } catch {
            // Give the connection back only once it is closed: released while
            // still closing, the pool could lend it to the next caller (the
            // worker recording the failure of the step just cancelled), whose
            // statement would then fail with ConnectionClosed.
            if closing.load(ordering: .sequentiallyConsistent) { try? await connection.closeFuture.get() }
            throw error
        }
    }
}

/// Calls back when a connection closes: one observer on each connection's
/// `closeFuture`, however many statements wait on it over its life (a
/// callback per statement would pile up on a connection that lives for days).
final class ConnectionCloseWatch: Sendable {
    static let shared = ConnectionCloseWatch()

    private struct State {
        var waiters: [ObjectIdentifier: [UInt64: @Sendable () -> Void]] = [:]
        var nextToken: UInt64 = 0
    }
    private let state = Mutex(State())

    /// Calls `onClose` if the connection closes before the returned function
    /// is called (at once if it is closed already).
    func watch(_ connection: PostgresConnection, onClose: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        let key = ObjectIdentifier(connection)
        let (token, first) = state.withLock { state -> (UInt64, Bool) in
            let token = state.nextToken
            state.nextToken &+= 1
            let first = state.waiters[key] == nil
            state.waiters[key, default: [:]][token] = onClose
            return (token, first)
        }
        if first {
            connection.closeFuture.whenComplete { [self] _ in
                let waiters = state.withLock { $0.waiters.removeValue(forKey: key) } ?? [:]
                for waiter in waiters.values { waiter() }
            }
        }
        return { [self] in
            _ = state.withLock { $0.waiters[key]?.removeValue(forKey: token) }
        }
    }
}

extension PostgresConnection {
    /// BEGIN, `body`, COMMIT on a connection that is already guarded (inside
    /// `withGuardedConnection`); ROLLBACK on error, unless the connection is
    /// gone (the server rolls back by itself then). A connection whose
    /// ROLLBACK failed may still hold the open transaction: it is closed (the
    /// server rolls back), so the pool never hands it to the next caller.
    func guardedTransaction<T>(logger: Logger, _ body: () async throws -> T) async throws -> T {
        try await control(BeginStatement(), logger: logger)
        do {
            let value = try await body()
            try await control(CommitStatement(), logger: logger)
            return value
        } catch {
            if !isClosed {
                do { try await query("ROLLBACK", logger: logger) } catch {
                    try? await close()
                }
            }
            throw error
        }
    }
}

extension PostgresConnection {
    /// A prepared statement's rows, all of them.
    fileprivate func rows<Statement: PostgresPreparedStatement>(of statement: Statement, logger: Logger) async throws
        -> [Statement.Row] {
        var rows: [Statement.Row] = []
        for try await row in try await execute(statement, logger: logger) { rows.append(row) }
        return rows
    }

    /// A statement that answers no rows, prepared once per connection.
    fileprivate func control<Statement: PostgresPreparedStatement>(_ statement: Statement, logger: Logger) async throws {
        for try await _ in try await execute(statement, logger: logger) {}
    }
}

/// BEGIN and COMMIT, prepared once per connection: then each is a Bind and
/// an Execute, where a plain query is parsed and described again, on both
/// sides, for every transaction (and the inbox commits one per batch).
private struct BeginStatement: PostgresPreparedStatement {
    static let name = "siwa_begin"
    static let sql = "BEGIN"
    typealias Row = Int
    func makeBindings() throws -> PostgresBindings { PostgresBindings() }
    func decodeRow(_ row: PostgresRow) throws -> Int { try row.decode(Int.self) }
}

private struct CommitStatement: PostgresPreparedStatement {
    static let name = "siwa_commit"
    static let sql = "COMMIT"
    typealias Row = Int
    func makeBindings() throws -> PostgresBindings { PostgresBindings() }
    func decodeRow(_ row: PostgresRow) throws -> Int { try row.decode(Int.self) }
}

extension PostgresClient {
    /// LISTENs on `channel`, on a guarded connection of its own, until the
    /// task is cancelled; a connection lost (a database restart) is
    /// replaced a second later. `listening` runs once the server has
    /// confirmed the LISTEN (PostgresNIO calls the consumer only then),
    /// `notified` for each notification, and `ended` each time a LISTEN
    /// ends, with the error unless the task was cancelled.
    public func listenUntilCancelled(
        on channel: String,
        listening: @escaping @Sendable () -> Void,
        notified: @escaping @Sendable () -> Void,
        ended: (_ error: (any Error)?) -> Void
    ) async {
        while !Task.isCancelled {
            do {
                // Guarded: the wait ends when the connection closes, whatever
                // the notification stream does.
                try await withGuardedConnection { connection in
                    try await connection.listen(on: channel) { notifications in
                        listening()
                        for try await _ in notifications { notified() }
                    }
                }
                ended(nil)
            } catch {
                ended(Task.isCancelled ? nil : error)
                if Task.isCancelled { return }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
