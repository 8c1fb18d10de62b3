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
        let database = await withDeadline(.seconds(2)) { try await queries.ping(logger: logger) } != nil
        let keysLoaded = keys.isLoaded
        let ready = database && keysLoaded
        return JSONResponse.make(ready ? .ok : .serviceUnavailable, [
            "status": ready ? "ready" : "not_ready",
            "database": database ? "ok" : "unreachable",
            "apple_keys": keysLoaded ? "loaded" : "not_loaded",
        ])
    }
}
