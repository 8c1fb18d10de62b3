import AppleSignIn
import Metrics
import Tracing

/// siwa's `AppleCallObserver`: every call to Apple (`/auth/token`,
/// `/auth/revoke`, `/auth/keys`, `/auth/usermigrationinfo`) runs inside a
/// client span `siwa.apple.ENDPOINT` (with the request's id when a request
/// made it) and is timed into
/// `siwa_apple_request_duration_seconds{endpoint,outcome}`.
///
/// Every endpoint and outcome has its series from the start, at 0, so that
/// the first `invalid_client` is an increase an alert can see.
public struct AppleCallTelemetry: AppleCallObserver {
    private let timers: [String: Timer]

    public init(metrics: any MetricsFactory) {
        var timers: [String: Timer] = [:]
        for endpoint in AppleEndpoint.allCases {
            for outcome in AppleCallOutcome.allCases {
                timers[Self.key(endpoint, outcome)] = Timer(
                    label: "siwa_apple_request_duration_seconds",
                    dimensions: [("endpoint", endpoint.rawValue), ("outcome", outcome.rawValue)], factory: metrics)
            }
        }
        self.timers = timers
    }

    private static func key(_ endpoint: AppleEndpoint, _ outcome: AppleCallOutcome) -> String {
        endpoint.rawValue + " " + outcome.rawValue
    }

    public func observe<Result: Sendable>(_ endpoint: AppleEndpoint, _ call: () async -> (Result, AppleCallOutcome)) async -> Result {
        let start = ContinuousClock.now
        return await withSpan("siwa.apple." + endpoint.rawValue, ofKind: .client) { span in
            RequestLogContext.tag(span)
            let (result, outcome) = await call()
            span.attributes["siwa.apple.outcome"] = outcome.rawValue
            if outcome != .ok { span.setStatus(SpanStatus(code: .error)) }
            timers[Self.key(endpoint, outcome)]?.record(duration: ContinuousClock.now - start)
            return result
        }
    }
}
