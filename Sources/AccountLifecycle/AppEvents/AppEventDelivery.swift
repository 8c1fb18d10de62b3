import AccountStore
import AppleSignIn
import Crypto
import Foundation
import Logging
import Synchronization

/// Where the app's events go (SIWA_APP_WEBHOOK_*).
public struct AppWebhookTarget: Sendable {
    public let url: URL
    /// The current secret's key, then the next one's during a rotation:
    /// each signs every delivery.
    public let keys: [SymmetricKey]
    public let timeoutSeconds: Double
    /// Apple's email events carry the user's email address (else none does).
    public let includeEmail: Bool

    public init(url: URL, keys: [SymmetricKey], timeoutSeconds: Double, includeEmail: Bool) {
        self.url = url
        self.keys = keys
        self.timeoutSeconds = timeoutSeconds
        self.includeEmail = includeEmail
    }
}

/// The `app_event` job kind: each job POSTs one event to the app's backend
/// in the Standard Webhooks envelope `{"type","timestamp","data"}`, signed,
/// with the event's own webhook-id (the same on every attempt), and
/// completes the job on a 2xx. Anything else is a failed attempt, which the
/// worker's retry policy retries with the jobs' backoff until the attempts
/// are used up (JobExecutor, RetryPolicy, JobQueue.fail); the user's later
/// events wait for it (ClaimAppEventsStatement).
///
/// It claims its own jobs (SelfClaimingJobKindRunner): the claim keeps each
/// user's events in order and builds their bodies in the same statement;
/// the claimed events wait here, by lease, until the worker runs each.
public final class AppEventDelivery: SelfClaimingJobKindRunner {
    public typealias Parameters = AppEventParameters
    /// The step name in failures, metrics and spans.
    public static let stepName = "app_event.deliver"

    let queue: AppEventQueue
    let target: AppWebhookTarget
    let webhooks: WebhookDelivery
    let metrics: JobMetrics
    let logger: Logger
    private let claimed = Mutex([String: ClaimedAppEvent]())

    public init(queue: AppEventQueue, target: AppWebhookTarget, webhooks: WebhookDelivery, metrics: JobMetrics = .disabled,
                logger: Logger) {
        self.queue = queue
        self.target = target
        self.webhooks = webhooks
        self.metrics = metrics
        self.logger = logger
    }

    public static func make(_ resources: JobKindResources) -> (any JobKindRunner)? {
        resources.appWebhook.map {
            AppEventDelivery(queue: resources.appEvents, target: $0, webhooks: resources.webhooks, metrics: resources.metrics,
                             logger: Logger(label: "siwa.app-events"))
        }
    }

    public var stepNames: [String] { [Self.stepName] }

    /// Claims up to `limit` deliveries, each user's earliest pending one only.
    public func claim(limit: Int, leaseSeconds: Double) async throws -> [ClaimedJob] {
        let events = try await queue.claim(limit: limit, leaseSeconds: leaseSeconds, includeEmail: target.includeEmail)
        claimed.withLock { held in
            for event in events { held[event.job.lease] = event }
        }
        return events.map(\.job)
    }

    /// One attempt at one claimed delivery (its body was built by the claim).
    public func run(_ job: ClaimedJob, _ parameters: AppEventParameters) async throws -> JobRunOutcome {
        guard let event = claimed.withLock({ $0.removeValue(forKey: job.lease) }) else {
            let text = "the delivery was not claimed by this worker's app webhook"
            throw StepFailure(step: Self.stepName, detail: text, summary: text, permanent: false)
        }
        guard let timestamp = event.occurredAt, let data = event.data else {
            let text = "the job's args name no event of its audit row (args.audit_seq, apple_sub, event_type and event_id must be as siwa enqueues them); refused, not sent"
            throw StepFailure(step: Self.stepName, detail: text, summary: text, permanent: true)
        }
        let body = Self.envelope(type: event.eventType, timestamp: timestamp, data: data)
        do {
            _ = try await metrics.measure(step: Self.stepName, jobID: job.id) {
                try await webhooks.deliver(to: target.url, keys: target.keys, timeoutSeconds: target.timeoutSeconds,
                                           id: event.eventID, body: body)
            }
        } catch let failure as WebhookFailure {
            metrics.webhookFailed(step: Self.stepName, statusClass: failure.statusClass.rawValue)
            throw StepFailure(step: Self.stepName, detail: failure.description, summary: failure.description, permanent: false)
        }
        do {
            return try await queue.complete(job) ? .completed : .leaseLost
        } catch {
            // Delivered but not recorded: the job is retried or rescued and
            // delivered again, with the same webhook-id (at-least-once).
            throw StepFailure(step: Self.stepName, error: error)
        }
    }

    /// `{"type":…,"timestamp":…,"data":…}`, `data` as the database built it.
    public static func envelope(type: String, timestamp: String, data: String) -> Data {
        Data(#"{"type":\#(JSONText.quoted(type)),"timestamp":\#(JSONText.quoted(timestamp)),"data":\#(data)}"#.utf8)
    }
}
