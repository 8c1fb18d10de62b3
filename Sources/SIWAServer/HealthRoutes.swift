import AccountStore
import AppleSignIn
import Foundation
import Hummingbird
import Logging
import Prometheus

/// `/healthz` (the process answers), `/readyz` (database reachable and
/// Apple's keys loaded), `/metrics` (Prometheus text).
struct HealthRoutes: Sendable {
    let keys: AppleKeySet
    let queries: AccountQueries
    let registry: PrometheusCollectorRegistry
    let logger: Logger

    func register(on router: Router<BasicRequestContext>) {
        router.get("/healthz") { _, _ in JSONResponse.make(.ok, ["status": "ok"]) }
        router.get("/readyz") { _, _ in await readiness() }
        router.get("/metrics") { _, _ in
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
    }

    func readiness() async -> Response {
        let database = await withTimeout(.seconds(2)) { try await queries.ping(logger: logger) }
        let keysLoaded = keys.isLoaded
        let ready = database && keysLoaded
        return JSONResponse.make(ready ? .ok : .serviceUnavailable, [
            "status": ready ? "ready" : "not_ready",
            "database": database ? "ok" : "unreachable",
            "apple_keys": keysLoaded ? "loaded" : "not_loaded",
        ])
    }
}

/// True if `work` finished without error within `limit`.
func withTimeout(_ limit: Duration, _ work: @escaping @Sendable () async throws -> Void) async -> Bool {
    let result = OneShot<Bool>()
    let worker = Task {
        do { try await work(); result.complete(.success(true)) } catch { result.complete(.success(false)) }
    }
    let timer = Task {
        try await Task.sleep(for: limit)
        result.complete(.success(false))
        worker.cancel()
    }
    defer { timer.cancel() }
    return (try? await result.wait()) ?? false
}
