import AppleSignIn
import Metrics

/// `siwa_notifications_total{outcome, type}`, created once: making a metric
/// per request costs a registry look-up under a lock on the hot path.
final class NotificationMetrics: Sendable {
    static let outcomes = ["recorded", "duplicate", "unavailable", "rejected"]
    static let types = AppleEventType.allCases.map(\.rawValue) + ["other", "none"]

    private let counters: [String: Counter]

    init(factory: any MetricsFactory) {
        var counters: [String: Counter] = [:]
        for outcome in Self.outcomes {
            for type in Self.types {
                counters["\(outcome) \(type)"] = Counter(label: "siwa_notifications_total",
                                                         dimensions: [("outcome", outcome), ("type", type)], factory: factory)
            }
        }
        self.counters = counters
    }

    func count(outcome: String, type: String) {
        counters["\(outcome) \(type)"]?.increment()
    }
}
