import AccountStore
import Foundation
import PostgresNIO

/// Every kind of job siwa has, by its runner: the one list the worker makes
/// its runners from, and that the `/metrics` gauges, `siwa jobs --kind`, the
/// admin routes and the alert rules' test take the kinds' names from, so no
/// kind's name is written anywhere else. A new kind is its runner, its SQL
/// and one line here.
public enum JobKinds {
    /// In claim order: purges first; the app's deliveries take the slots they
    /// leave; then an app transfer's calls to Apple (on the maintenance leader only).
    static var runnerTypes: [any JobKindRunner.Type] {
        [PurgeJobRunner.self, AppEventDelivery.self, TransferPrepareRunner.self, TransferCompleteRunner.self]
    }

    public static let names: [String] = runnerTypes.map { $0.kind }

    /// "purge_user, app_event, ...": for help texts and refusals.
    public static var listed: String { names.joined(separator: ", ") }

    public static func contains(_ name: String) -> Bool { names.contains(name) }

    /// The runners of the kinds this worker runs (a kind may be off: the
    /// app's deliveries without SIWA_APP_WEBHOOK_URL), in claim order.
    public static func runners(_ resources: JobKindResources) -> JobRunners {
        JobRunners(runnerTypes.compactMap { $0.make(resources) })
    }
}

/// What `siwa worker` has for its kinds' runners to be made from
/// (`JobKindRunner.make`): the queue, the webhook client and the metrics
/// every kind may use, and each kind's own settings. A kind that needs
/// something new adds it here.
public struct JobKindResources: Sendable {
    public var queue: JobQueue
    public var webhooks: WebhookDelivery
    public var metrics: JobMetrics
    /// The purge's: its plan, a client for each plan step on another
    /// database, the revoker of stored Apple tokens (nil without sign-in
    /// settings) and the role its SQL steps on siwa's database run as.
    public var plan: PurgePlan
    public var externalDatabases: [String: PostgresClient]
    public var revoker: TokenRevoker?
    public var purgeRole: String
    /// The app's deliveries: their side of the queue, and where they go
    /// (nil: the webhook is off and the kind is not run).
    public var appEvents: AppEventQueue
    public var appWebhook: AppWebhookTarget?
    /// An app transfer's two kinds (nil without sign-in settings: they are not run).
    public var transfer: TransferRunnerResources?

    public init(queue: JobQueue, webhooks: WebhookDelivery, metrics: JobMetrics, plan: PurgePlan,
                externalDatabases: [String: PostgresClient], revoker: TokenRevoker?, purgeRole: String,
                appEvents: AppEventQueue, appWebhook: AppWebhookTarget?, transfer: TransferRunnerResources? = nil) {
        self.transfer = transfer
        self.queue = queue
        self.webhooks = webhooks
        self.metrics = metrics
        self.plan = plan
        self.externalDatabases = externalDatabases
        self.revoker = revoker
        self.purgeRole = purgeRole
        self.appEvents = appEvents
        self.appWebhook = appWebhook
    }
}
