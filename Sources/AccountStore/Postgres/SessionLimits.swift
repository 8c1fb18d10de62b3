/// PostgreSQL's own limits on every session of a pool, sent as start-up
/// parameters, so they hold for every statement whatever code runs it (and
/// end a wait that siwa's client could not: one on a lock held by a session
/// that is stuck, say an operator's `BEGIN; SELECT ... FOR UPDATE` left
/// open). A statement stopped by one fails like any other: the inbox
/// retries its batch entry by entry and answers 503 (Apple retries), a
/// worker's step fails and is retried after its backoff. A plan's SQL step
/// sets its own limits for its transaction (PurgeJobRunner.stepSettings).
public struct SessionLimits: Sendable, Equatable {
    /// `lock_timeout`: the longest one statement waits for a lock.
    public var lockTimeout: String?
    /// `statement_timeout`: the longest one statement runs.
    public var statementTimeout: String?
    /// `idle_in_transaction_session_timeout`: the longest a session may sit
    /// in an open transaction with no statement running before the server
    /// ends it (rolling back, releasing its locks).
    public var idleInTransactionTimeout: String?

    public init(lockTimeout: String? = nil, statementTimeout: String? = nil, idleInTransactionTimeout: String? = nil) {
        self.lockTimeout = lockTimeout
        self.statementTimeout = statementTimeout
        self.idleInTransactionTimeout = idleInTransactionTimeout
    }

    /// `siwa serve` and `siwa worker`.
    ///
    /// - 5 s for a lock: siwa's own transactions hold a user's row or job
    ///   for milliseconds (a notification batch, a sign-in, a purge's
    ///   erase), so a longer wait is a stuck session. A batch blocked that
    ///   long would stall its writer and the batch behind it; the worker's
    ///   claim loop runs a claimed batch's erase itself, and must move on to
    ///   other jobs. Well under the default job lease (60 s), which that
    ///   erase must not outlast.
    /// - 120 s for a statement: a backstop for a runaway one, no tighter
    ///   than the longest SIWA_INGEST_TIMEOUT_SECONDS allowed.
    /// - 60 s idle in a transaction: siwa waits for nothing but the
    ///   database inside one (Apple's and webhooks' calls come between
    ///   transactions), so a session idle that long lost its client.
    public static let runtime = SessionLimits(lockTimeout: "5s", statementTimeout: "120s", idleInTransactionTimeout: "60s")

    var startupParameters: [(String, String)] {
        [("lock_timeout", lockTimeout), ("statement_timeout", statementTimeout),
         ("idle_in_transaction_session_timeout", idleInTransactionTimeout)].compactMap { name, value in
            value.map { (name, $0) }
        }
    }
}
