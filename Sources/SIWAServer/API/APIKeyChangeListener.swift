import AccountStore
import Logging
import PostgresNIO
import ServiceLifecycle

/// LISTENs on `siwa_api_keys` (sql/013's triggers NOTIFY it when a key is
/// revoked, renamed, re-scoped or deleted) and tells the `/v1` key cache.
/// The cache is on only while this LISTEN is up: after a database restart
/// every request asks the database again until LISTEN is back.
///
/// A connection can also die without a word (no FIN, no RST: a peer or a
/// firewall gone), and then the LISTEN just hears nothing, revokes
/// included. So the listener NOTIFYs a heartbeat on the channel from the
/// pool every `heartbeat.interval`; the LISTEN hears it (or another
/// instance's) while it is alive. Nothing heard within `heartbeat.timeout`:
/// the cache is off already (APIKeyCache checks the time itself), and the
/// connection is dropped and LISTEN started again on a new one.
struct APIKeyChangeListener: Service {
    let client: PostgresClient
    let cache: APIKeyCache
    let logger: Logger

    /// Why a LISTEN was given up: nothing heard within the timeout.
    struct HeartbeatLost: Error, CustomStringConvertible {
        let timeout: Duration
        var description: String { "no heartbeat heard on the LISTEN connection for \(timeout)" }
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var failures = 0
            while !Task.isCancelled {
                let error = await listenOnce()
                cache.setListening(false)
                if Task.isCancelled { break }
                failures += 1
                if failures == 1 || failures % 60 == 0 {
                    logger.notice("API key changes cannot be heard (LISTEN lost); every request asks the database until it is back",
                                  metadata: ["error": "\(error.map { $0 is HeartbeatLost ? "\($0)" : safeDescription($0) } ?? "none")"])
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
        cache.setListening(false)
    }

    /// One LISTEN connection, with its heartbeat and its watchdog, until
    /// one of them ends: the connection's error, a lost heartbeat, or nil
    /// when cancelled. Ending the LISTEN task closes its connection
    /// (withGuardedConnection), so a dead one is not kept.
    private func listenOnce() async -> (any Error)? {
        await withTaskGroup(of: (any Error)?.self) { group in
            group.addTask { [client, cache] in
                do {
                    try await client.withGuardedConnection { connection in
                        try await connection.listen(on: APIKeyCache.channel) { notifications in
                            cache.setListening(true)
                            for try await notification in notifications {
                                if notification.payload == APIKeyCache.heartbeatPayload { cache.heard() } else { cache.keysChanged() }
                            }
                        }
                    }
                    return nil
                } catch {
                    return Task.isCancelled ? nil : error
                }
            }
            group.addTask { [client, cache, logger] in
                let interval = cache.heartbeat.interval
                let seconds = interval / .seconds(1)
                while !Task.isCancelled {
                    // From the pool, not the LISTEN connection: what is
                    // tested is whether that one still delivers. A failure
                    // here only means no heartbeat this time.
                    do {
                        try await withTimeLimit(seconds: max(seconds, 0.1)) {
                            _ = try await client.guardedQuery("SELECT pg_notify(\(APIKeyCache.channel), \(APIKeyCache.heartbeatPayload))",
                                                              logger: logger)
                        }
                    } catch {
                        logger.debug("API key heartbeat not sent", metadata: ["error": "\(safeDescription(error))"])
                    }
                    try? await Task.sleep(for: interval)
                }
                return nil
            }
            group.addTask { [cache] in
                let check = cache.heartbeat.timeout / 10
                while !Task.isCancelled {
                    try? await Task.sleep(for: check)
                    if cache.heartbeatLost { return HeartbeatLost(timeout: cache.heartbeat.timeout) }
                }
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}
