import Foundation
import Logging
import PostgresNIO
import Synchronization

/// Records verified notifications with group commit.
///
/// A durable commit costs a disk flush; one notification per transaction tops
/// out at a few thousand per second. Here a `RoundTripBatcher` takes what
/// callers queued into one transaction per batch; each caller is answered
/// after its own batch commits. If a batch fails (a lost connection, a lock
/// timeout), its entries are retried one transaction each, so one bad entry
/// never fails the others.
///
/// Each Apple user (`sub`) has one lane: every row a notification locks
/// (its user, its pending purge job, its `jti`, which Apple never reuses for
/// another sub) belongs to that sub, so two inbox batches never wait for
/// each other and cannot deadlock, whatever Apple redelivers when. (Sign-in
/// batches lock existing users in the inbox statement's order too.)
public final class InboxWriter: Sendable {
    /// The writers (`lanes`), the batch size, and how long a caller waits for
    /// its commit before giving up (the HTTP layer answers 503 and Apple
    /// retries; a late commit is harmless, the retry is then a duplicate).
    public typealias Options = RoundTripBatching

    private let batcher: RoundTripBatcher<InboxEntry, InboxOutcome>

    /// Batches whose transaction failed and were retried entry by entry
    /// (a lost connection, a lock timeout), since start.
    public var failedBatchCount: Int { batcher.failedBatchCount }

    public init(client: PostgresClient, options: Options = .init(), logger: Logger) {
        batcher = RoundTripBatcher(options: options, logger: logger, laneKey: \.appleSub) { entries in
            // A transaction even for one statement: Apple's 200 waits for
            // COMMIT (see `guardedCommittedExecute`).
            try await client.withGuardedTransaction(logger: logger) { connection in
                try await Self.record(entries, on: connection, logger: logger)
            }
        }
    }

    /// Record one entry; returns once its transaction has committed.
    /// Throws `InboxUnavailable` when the database cannot be reached in time.
    public func record(_ entry: InboxEntry) async throws -> InboxOutcome {
        do {
            return try await batcher.call(entry)
        } catch let unavailable as RoundTripUnavailable {
            throw InboxUnavailable(reason: unavailable.reason)
        } catch let timedOut as RoundTripTimedOut {
            throw InboxUnavailable(reason: timedOut.sent ? "no commit within \(timedOut.timeout)" : "queued too long")
        } catch {
            throw InboxUnavailable(reason: "database error")
        }
    }

    /// Run the writers until `close()` is called and the queue is drained.
    public func run() async { await batcher.run() }

    /// Stop accepting entries; writers finish what is queued, then `run()` returns.
    public func close() { batcher.close() }

    /// Records `entries` in one transaction (the caller's), one statement
    /// per round; returns their outcomes in order.
    public static func record(_ entries: [InboxEntry], on connection: PostgresConnection, logger: Logger) async throws -> [InboxOutcome] {
        var outcomes = [InboxOutcome](repeating: .duplicate, count: entries.count)
        for round in RecordNotificationStatement.rounds(of: entries) {
            let statement = RecordNotificationStatement(entries: round.map { entries[$0] })
            var answered = 0
            for try await row in try await connection.execute(statement, logger: logger) {
                outcomes[round[Int(row.0) - 1]] = RecordNotificationStatement.outcome(of: row)
                answered += 1
            }
            guard answered == round.count else { throw InboxStatementMismatch(expected: round.count, got: answered) }
        }
        return outcomes
    }
}

/// The batch statement answered a different number of rows than it was
/// given: a bug, never a reason to acknowledge a notification.
struct InboxStatementMismatch: Error {
    let expected: Int
    let got: Int
}
/// The inbox could not record the entry now; the sender should retry.
public struct InboxUnavailable: Error, Sendable, CustomStringConvertible {
    public let reason: String
    public var description: String { "the notification inbox is unavailable: \(reason)" }
}
