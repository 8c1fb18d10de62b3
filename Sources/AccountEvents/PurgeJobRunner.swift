import AccountStore
import AppleSignIn
import Foundation
import Logging
import PostgresNIO
import Tracing

/// Runs one `purge_user` job: the revocation of the user's Apple tokens
/// (when siwa holds any), the built-in step, then the plan's steps in
/// order, skipping those an earlier attempt recorded as done. A token-only
/// job (a sign-out) runs the revocation alone. Each step is
/// recorded as it completes; the last record completes the job, and with
/// receipts on (SIWA_RECEIPT_KEY_FILE) signs and stores the purge's deletion
/// receipt in the same transaction (JobQueue).
public struct PurgeJobRunner: JobKindRunner {
    public static let kind = "purge_user"

    let plan: PurgePlan
    let queue: JobQueue
    /// Clients for steps on other databases, by step name.
    let externalDatabases: [String: PostgresClient]
    let webhooks: WebhookDelivery
    /// nil when the worker has no sign-in settings: a user with stored
    /// tokens then cannot be purged (the step fails and says why).
    let revoker: TokenRevoker?
    let metrics: JobMetrics
    /// What the plan's SQL steps on siwa's database run as (SIWA_PURGE_ROLE).
    let purgeRole: String
    let logger: Logger

    public init(plan: PurgePlan, queue: JobQueue, externalDatabases: [String: PostgresClient],
                webhooks: WebhookDelivery, revoker: TokenRevoker? = nil, metrics: JobMetrics = .disabled,
                purgeRole: String, logger: Logger) {
        self.plan = plan
        self.purgeRole = purgeRole
        self.queue = queue
        self.externalDatabases = externalDatabases
        self.webhooks = webhooks
        self.revoker = revoker
        self.metrics = metrics
        self.logger = logger
    }

    /// One attempt at the job, as a span (`siwa.job`, a no-op unless a
    /// tracer is bootstrapped) holding its steps' spans.
    public func run(_ job: ClaimedJob) async throws -> JobRunOutcome {
        try await withSpan("siwa.job", ofKind: .consumer) { span in
            span.attributes["siwa.job.id"] = Int(job.id)
            span.attributes["siwa.job.kind"] = job.kind
            span.attributes["siwa.job.attempt"] = job.attempt
            return try await runSteps(job)
        }
    }

    private func runSteps(_ job: ClaimedJob) async throws -> JobRunOutcome {
        guard let sub = job.appleSub, !sub.isEmpty else {
            throw StepFailure(step: nil, detail: "args has no apple_sub", summary: "args has no apple_sub", permanent: true)
        }
        if job.tokensOnly {
            // A sign-out (consent revoked under `sign_out`): revoke and
            // delete the tokens, keep the rest. Not a purge, so no deletion
            // receipt is signed for it (DeletionReceipts.issue skips
            // args.scope 'tokens'); a deletion merged into it later makes it
            // a whole purge, or a rerun that is one, and that gets a receipt.
            let step = JobStep(jobID: job.id, lease: job.lease, name: AppleTokenStore.revokeStepName, completesJob: true)
            return try await measured(step, job: job) { try await revokeTokens(job, sub: sub, as: step) } ? .completed : .leaseLost
        }
        if job.holdsTokens && !job.stepsDone.contains(AppleTokenStore.revokeStepName) {
            let step = JobStep(jobID: job.id, lease: job.lease, name: AppleTokenStore.revokeStepName, completesJob: false)
            guard try await measured(step, job: job, { try await revokeTokens(job, sub: sub, as: step) }) else { return .leaseLost }
        }
        // A consent revocation's purge: the tokens are gone now; the data
        // waits out the grace delay (a sign-in before then cancels the job).
        if Self.waiting(job) {
            switch try await queue.snooze(job, untilArg: Self.purgeAfterArg) {
            case .snoozed: return .snoozed
            case .leaseLost: return .leaseLost
            case .due: break  // the database's clock says its time has come
            }
        }
        let names = plan.allStepNames
        let remaining = names.indices.filter { !job.stepsDone.contains(names[$0]) }
        guard let lastRemaining = remaining.last else {
            // Every step was recorded but the job was not completed (the plan
            // lost steps since): complete it.
            return try await queue.complete(job) ? .completed : .leaseLost
        }
        for index in remaining {
            try Task.checkCancellation()
            let step = JobStep(jobID: job.id, lease: job.lease, name: names[index], completesJob: index == lastRemaining)
            let held = try await measured(step, job: job) {
                if index == 0 { return try await eraseSiwaData(step) }
                return try await perform(plan.steps[index - 1], as: step, job: job, sub: sub)
            }
            guard held else { return .leaseLost }
            logger.debug("Step completed", metadata: ["job": "\(job.id)", "step": "\(step.name)"])
        }
        return .completed
    }

    /// One step of one job: a span (`siwa.job.step`, when a tracer is
    /// bootstrapped; else a no-op) and its duration by step and outcome.
    private func measured(_ step: JobStep, job: ClaimedJob, _ body: () async throws -> Bool) async throws -> Bool {
        let start = ContinuousClock.now
        do {
            let held = try await withSpan("siwa.job.step", ofKind: .internal) { span in
                span.attributes["siwa.job.id"] = Int(job.id)
                span.attributes["siwa.job.step"] = step.name
                return try await body()
            }
            metrics.step(step.name, failed: false, seconds: ContinuousClock.now - start)
            return held
        } catch {
            metrics.step(step.name, failed: true, seconds: ContinuousClock.now - start)
            throw error
        }
    }

    private func revokeTokens(_ job: ClaimedJob, sub: String, as step: JobStep) async throws -> Bool {
        guard let revoker else {
            let text = "the user has stored Apple tokens and this worker has no sign-in settings (SIWA_APPLE_TEAM_ID, SIWA_APPLE_KEY_ID, SIWA_APPLE_PRIVATE_KEY_FILE, SIWA_TOKEN_ENCRYPTION_KEYS_FILE) to revoke them"
            throw StepFailure(step: step.name, detail: text, summary: text, permanent: false)
        }
        return try await revoker.revoke(for: job, sub: sub, step: step)
    }

    private func eraseSiwaData(_ step: JobStep) async throws -> Bool {
        do {
            return try await queue.erasePersonalData([(step.jobID, step.lease)], completes: [step.completesJob]).contains(step.jobID)
        } catch {
            throw StepFailure(step: step.name, error: error)
        }
    }

    /// The job argument that holds a grace delay's end (sql/015).
    static let purgeAfterArg = "purge_after"

    /// The job waits out a grace delay (`args.purge_after` in the future).
    static func waiting(_ job: ClaimedJob, now: Date = Date()) -> Bool {
        guard job.args.contains(purgeAfterArg), case .string(let text)? = try? JSONValue(parsing: job.args)[purgeAfterArg],
              // siwa.utc_iso's form, 2026-12-24T10:00:00.123456Z: to the second is enough here.
              let due = try? Date(String(text.prefix(19)) + "Z", strategy: .iso8601)
        else { return false }
        return due > now
    }

    /// The revocation, the built-in step and the plan's, in order.
    public var stepNames: [String] { [AppleTokenStore.revokeStepName] + plan.allStepNames }

    /// The built-in step for a freshly claimed batch in one statement (the
    /// queue's hot path: with no plan steps, the batch is done here). Returns
    /// the jobs that still have steps to run, the step now recorded for
    /// them. On an error nothing was recorded and every job is returned, to
    /// run (and fail, if it must) on its own.
    public func runBatchStep(for jobs: [ClaimedJob]) async -> [ClaimedJob] {
        let builtIn = PurgePlan.builtInStepName
        // Users with tokens, and sign-outs, run one by one: Apple revokes first.
        let batch = jobs.filter {
            !$0.stepsDone.contains(builtIn) && !($0.appleSub ?? "").isEmpty && !$0.tokensOnly
                && (!$0.holdsTokens || $0.stepsDone.contains(AppleTokenStore.revokeStepName)) && !Self.waiting($0)
        }
        guard !batch.isEmpty else { return jobs }
        let lastStep = plan.steps.isEmpty
        let completes = batch.map { job in lastStep || plan.steps.allSatisfy { job.stepsDone.contains($0.name) } }
        let done: Set<Int64>
        let start = ContinuousClock.now
        do {
            done = try await withSpan("siwa.job.step", ofKind: .internal) { span in
                span.attributes["siwa.job.step"] = builtIn
                span.attributes["siwa.job.batch"] = batch.count
                return try await queue.erasePersonalData(batch.map { ($0.id, $0.lease) }, completes: completes)
            }
            metrics.step(builtIn, failed: false, seconds: ContinuousClock.now - start)
        } catch {
            logger.debug("Built-in step for the batch failed; running the jobs one by one",
                         metadata: ["jobs": "\(batch.count)", "error": "\(StepFailure(step: builtIn, error: error).summary)"])
            return jobs
        }
        var unfinished: [ClaimedJob] = []
        for job in jobs {
            guard let index = batch.firstIndex(where: { $0.id == job.id }) else {
                unfinished.append(job)
                continue
            }
            // Not done: the lease was lost (the job was rescued); leave it.
            guard done.contains(job.id) else { continue }
            if completes[index] {
                metrics.completed(kind: job.kind)
                logger.info("Job completed", metadata: ["job": "\(job.id)", "attempt": "\(job.attempt)"])
            } else {
                unfinished.append(job.recording(builtIn))
            }
        }
        return unfinished
    }

    private func perform(_ planStep: PurgePlan.Step, as step: JobStep, job: ClaimedJob, sub: String) async throws -> Bool {
        let timeout = planStep.timeoutSeconds
        switch planStep.action {
        case .sql(let statements, nil):
            do {
                // The step's deadline covers its record too: a server that
                // never answers cannot hold the slot.
                return try await withTimeLimit(seconds: PurgePlan.clientDeadline(forSQLTimeout: timeout)) { [queue, purgeRole, logger] in
                    try await queue.inStepTransaction(step) { connection in
                        try await Self.run(statements, sub: sub, userID: job.userID, timeoutSeconds: timeout, as: purgeRole,
                                           on: connection, logger: logger)
                    }
                }
            } catch {
                throw StepFailure(step: step.name, error: error)
            }
        case .sql(let statements, .some):
            guard let client = externalDatabases[planStep.name] else {
                throw StepFailure(step: step.name, detail: "no database client", summary: "no database client", permanent: false)
            }
            do {
                try await withTimeLimit(seconds: PurgePlan.clientDeadline(forSQLTimeout: timeout)) { [logger] in
                    try await client.withGuardedTransaction(logger: logger) { connection in
                        try await Self.run(statements, sub: sub, userID: job.userID, timeoutSeconds: timeout, on: connection, logger: logger)
                    }
                }
            } catch {
                throw StepFailure(step: step.name, error: error)
            }
            return try await queue.recordStep(step)
        case .http(let target):
            let body = Self.webhookBody(job: job, sub: sub)
            do {
                try await webhooks.deliver(to: target, id: Self.webhookID(job: job, step: step.name), body: body)
            } catch let failure as WebhookFailure {
                metrics.webhookFailed(step: step.name, statusClass: failure.statusClass.rawValue)
                throw StepFailure(step: step.name, detail: failure.description, summary: failure.description, permanent: false)
            }
            return try await queue.recordStep(step)
        }
    }

    /// Stable across retries, so the downstream can de-duplicate.
    public static func webhookID(job: ClaimedJob, step: String) -> String {
        "siwa-job-\(job.id)-\(step)"
    }

    /// `{"job_id","apple_sub","user_id","event_type"}` (keys in this order).
    static func webhookBody(job: ClaimedJob, sub: String) -> Data {
        let userID = job.userID.map(String.init) ?? "null"
        let eventType = job.eventType.map(JSONText.quoted) ?? "null"
        return Data(#"{"job_id":\#(job.id),"apple_sub":\#(JSONText.quoted(sub)),"user_id":\#(userID),"event_type":\#(eventType)}"#.utf8)
    }

    /// The statements of one step, in the caller's transaction, after
    /// `stepSettings` (the step's statement_timeout). On siwa's database
    /// (`role` set) they run as the purge role, and the connection's own
    /// role is back before the caller records the step.
    static func run(_ statements: [PurgePlan.SQLStatement], sub: String, userID: Int64?, timeoutSeconds: Double,
                    as role: String? = nil, on connection: PostgresConnection, logger: Logger) async throws {
        try await drain(stepSettings(timeoutSeconds: timeoutSeconds), on: connection, logger: logger)
        if let role { try await drain(PurgeRole.become(role), on: connection, logger: logger) }
        for statement in statements {
            var query = PostgresQuery(unsafeSQL: statement.text)
            if statement.parameterCount >= 1 { query.binds.append(sub) }
            if statement.parameterCount >= 2 { query.binds.append(userID) }
            try await drain(query, on: connection, logger: logger)
        }
        if role != nil { try await drain(PurgeRole.leave, on: connection, logger: logger) }
    }

    /// Runs `query` to its end. A statement that returns rows answers
    /// `query` as soon as its first rows are described; an error while it
    /// runs (a statement_timeout, say) arrives only with the rows. Not
    /// reading them would let the error land on the next statement, or
    /// vanish into a COMMIT that PostgreSQL quietly turns into a ROLLBACK
    /// (and the step would be recorded as done with nothing done).
    static func drain(_ query: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws {
        for try await _ in try await connection.query(query, logger: logger) {}
    }

    /// The first statement of every plan SQL step's transaction (one round
    /// trip; the settings end with the transaction): the step's
    /// `statement_timeout`, which bounds its waits for locks too (the
    /// app's own rows may be held longer than siwa's: the worker's
    /// `lock_timeout`, SessionLimits.runtime, is lifted), and
    /// `standard_conforming_strings` on, which is how the plan's checks
    /// read quotes (PlanStatement).
    static func stepSettings(timeoutSeconds: Double) -> PostgresQuery {
        let milliseconds = String(max(Int((timeoutSeconds * 1000).rounded(.up)), 1))
        return """
            SELECT set_config('statement_timeout', \(milliseconds), true), set_config('lock_timeout', '0', true),
                   set_config('standard_conforming_strings', 'on', true)
            """
    }
}
