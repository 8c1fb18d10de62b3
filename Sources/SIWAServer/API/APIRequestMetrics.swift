import HTTPTypes
import Hummingbird
import Metrics
import Synchronization

/// `siwa_api_request_duration_seconds{route,method,status}`: a histogram of
/// every answer of the API listener (`/v1`), by the route's pattern
/// (`/v1/users/{sub}`, never the sub itself; `unmatched` for the router's
/// 404) and HTTP status, so its `_count` is the requests by route and
/// status. Hummingbird's own MetricsMiddleware would do this, but only
/// through the process-wide MetricsSystem, which siwa does not bootstrap:
/// each listener is given its registry's factory.
public final class APIRequestMetrics: Sendable {
    struct Key: Hashable {
        let route: String
        let method: HTTPRequest.Method
        let status: Int
    }

    let factory: any MetricsFactory
    /// Made once per route, method and status: a bounded set (the routes are siwa's own).
    private let timers = Mutex<[Key: Timer]>([:])

    public init(factory: any MetricsFactory) { self.factory = factory }

    func record(route: String?, method: HTTPRequest.Method, status: Int, since start: ContinuousClock.Instant) {
        let key = Key(route: route ?? "unmatched", method: method, status: status)
        let timer = timers.withLock { timers in
            if let timer = timers[key] { return timer }
            let timer = Timer(label: "siwa_api_request_duration_seconds",
                              dimensions: [("route", key.route), ("method", key.method.rawValue), ("status", String(status))],
                              factory: factory)
            timers[key] = timer
            return timer
        }
        timer.record(duration: ContinuousClock.now - start)
    }
}

/// Times each request into `APIRequestMetrics`, whatever answers it: a
/// route, a refusal of the API key, or an error thrown as an HTTP status.
struct APIMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: APIRequestMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            metrics.record(route: context.endpointPath, method: request.method, status: Int(response.status.code), since: start)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            metrics.record(route: context.endpointPath, method: request.method, status: Int(status.code), since: start)
            throw error
        }
    }
}
