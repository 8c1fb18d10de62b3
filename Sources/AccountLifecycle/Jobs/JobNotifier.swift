import AccountStore
import Logging
import PostgresNIO
import ServiceLifecycle

/// LISTENs on the queue's channel (`siwa_jobs`: the jobs table's insert and
/// requeue triggers NOTIFY it at commit) on a connection of its own, and
/// wakes the producer for each notification, so a job enqueued now starts
/// now rather than at the next poll. Reconnects after a database restart,
/// and wakes the producer then, for anything enqueued meanwhile; until it
/// is back, the producer's poll finds the jobs.
struct JobNotifier: Service {
    let client: PostgresClient
    let wakeup: Wakeup
    let logger: Logger

    func run() async {
        await cancelWhenGracefulShutdown {
            await client.listenUntilCancelled(on: JobQueue.wakeChannel, listening: wakeup.signal, notified: wakeup.signal) { error in
                if let error {
                    logger.debug("LISTEN connection lost; polling until it is back", metadata: ["error": "\(safeDescription(error))"])
                }
            }
        }
    }
}
