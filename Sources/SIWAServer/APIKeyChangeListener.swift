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
        await cancelWhenGracefulShutdown { await listen() }
        cache.setListening(false)
    }

    private func listen() async {
        var failures = 0
        while !Task.isCancelled {
            do {
                // Guarded: the wait ends when the connection closes, whatever
                // the notification stream does.
                try await client.withGuardedConnection { [cache] connection in
                    try await connection.listen(on: APIKeyCache.channel) { notifications in
                        // PostgresNIO calls this once the server has confirmed LISTEN.
                        cache.setListening(true)
                        defer { cache.setListening(false) }
                        for try await _ in notifications { cache.keysChanged() }
                    }
                }
            } catch {
                cache.setListening(false)
                if Task.isCancelled { return }
                failures += 1
                if failures == 1 || failures % 60 == 0 {
                    logger.notice("API key changes cannot be heard (LISTEN lost); every request asks the database until it is back",
                                  metadata: ["error": "\(safeDescription(error))"])
                }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
