import AccountStore
import Logging
import PostgresNIO
import ServiceLifecycle

/// LISTENs on `siwa_api_keys` (sql/013's triggers NOTIFY it when a key is
/// revoked, renamed, re-scoped or deleted) and tells the `/v1` key cache.
/// The cache is on only while this LISTEN is up: after a database restart
/// every request asks the database again until LISTEN is back.
struct APIKeyChangeListener: Service {
    let client: PostgresClient
    let cache: APIKeyCache
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var failures = 0
            await client.listenUntilCancelled(on: APIKeyCache.channel, listening: { [cache] in cache.setListening(true) },
                                              notified: cache.keysChanged) { error in
                cache.setListening(false)
                guard let error else { return }
                failures += 1
                if failures == 1 || failures % 60 == 0 {
                    logger.notice("API key changes cannot be heard (LISTEN lost); every request asks the database until it is back",
                                  metadata: ["error": "\(safeDescription(error))"])
                }
            }
        }
        cache.setListening(false)
    }
}
