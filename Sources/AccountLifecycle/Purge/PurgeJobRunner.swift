import AccountStore
import AppleSignIn
import Foundation
import Logging
import PostgresNIO
import Synchronization

/// Runs one `purge_user` job: the revocation of the user's Apple tokens
/// (when siwa holds any), the built-in step, then the plan's steps in
/// order, skipping those an earlier attempt recorded as done. A token-only
/// job (a sign-out) runs the revocation alone. Each step is
/// recorded as it completes; the last record completes the job, and the
/// purge's completion hook (PurgeCompletion: its deletion receipt, with
/// receipts on, and its erasure ledger line) runs in the same transaction.
///
/// The claim brings the job's args only: its user's id and whether they
/// hold tokens are looked up for the whole claimed batch in its batch step
/// (one statement, which also locks the users for the built-in step), and
/// kept here, by lease, for the jobs left to run one by one.
public final class PurgeJobRunner: JobKindRunner {
    public typealias Parameters = PurgeParameters

    let plan: PurgePlan
    let purges: PurgeQueue
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
    /// What the batch step looked up for the jobs it left to run, by lease;
    /// each run takes its own.
    private let targets = Mutex([String: PurgeTarget]())

    var queue: JobQueue { purges.jobs }

    public init(plan: PurgePlan, queue: JobQueue, externalDatabases: [String: PostgresClient],
                webhooks: WebhookDelivery, revoker: TokenRevoker? = nil, metrics: JobMetrics = .disabled,
                purgeRole: String, logger: Logger) {
        self.plan = plan
        self.purgeRole = purgeRole
        self.purges = PurgeQueue(jobs: queue)
        self.externalDatabases = externalDatabases
        self.webhooks = webhooks
        self.revoker = revoker
        self.metrics = metrics
        self.logger = logger
    }

    public static func make(_ resources: JobKindResources) -> (any JobKindRunner)? {
        PurgeJobRunner(plan: resources.plan, queue: resources.queue, externalDatabases: resources.externalDatabases,
                       webhooks: resources.webhooks, revoker: resources.revoker, metrics: resources.metrics,
                       purgeRole: resources.purgeRole, logger: Logger(label: "siwa.purge"))
    }

    /// One attempt at the job.
    public func run(_ job: ClaimedJob, _ parameters: PurgeParameters) async throws -> JobRunOutcome {
        let looked = targets.withLock { $0.removeValue(forKey: job.lease) }
        guard let sub = parameters.appleSub, !sub.isEmpty, let team = parameters.appleTeam, !team.isEmpty else {
            throw StepFailure(step: nil, detail: "args has no apple_sub and apple_team", summary: "args has no apple_sub and apple_team",
                              permanent: true)
        }
        if parameters.tokensOnly {
            // A sign-out (consent revoked under `sign_out`): revoke and
            // delete the tokens, keep the rest. Not a purge, so no deletion
            // receipt is signed for it (DeletionReceipts.issue skips
            // args.scope 'tokens'); a deletion merged into it later makes it
            // a whole purge, or a rerun that is one, and that gets a receipt.
            let step = JobStep(job, name: AppleTokenStore.revokeStepName, completesJob: true)
            return try await measured(step) { try await revokeTokens(job, sub: sub, team: team, signOut: true, as: step) } ? .completed : .leaseLost
        }
        let target: PurgeTarget
        if let looked {
            target = looked
        } else {
            // Not looked up with its batch (the batch step failed): on its own.
            do {
                target = try await purges.targets(of: [job.id])[job.id] ?? PurgeTarget(userID: nil, holdsTokens: false)
            } catch {
                throw StepFailure(step: nil, error: error)
            }
        }
        if target.holdsTokens && !job.stepsDone.contains(AppleTokenStore.revokeStepName) {
            let step = JobStep(job, name: AppleTokenStore.revokeStepName, completesJob: false)
            guard try await measured(step, { try await revokeTokens(job, sub: sub, team: team, signOut: false, as: step) }) else { return .leaseLost }
        }
        // A consent revocation's purge: the tokens are gone now; the data
        // waits out the grace delay (a sign-in before then cancels the job).
        if Self.waiting(parameters) {
            switch try await queue.snooze(job, untilArg: PurgeParameters.purgeAfterKey) {
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
        let context = StepContext(jobID: job.id, sub: sub, team: team, userID: target.userID, eventType: parameters.eventType)
        for index in remaining {
            try Task.checkCancellation()
            let step = JobStep(job, name: names[index], completesJob: index == lastRemaining)
            let held = try await measured(step) {
                if index == 0 { return try await eraseSiwaData(step) }
                return try await perform(plan.steps[index - 1], as: step, context: context)
            }
            guard held else { return .leaseLost }
            logger.debug("Step completed", metadata: ["job": "\(job.id)", "step": "\(step.name)"])
        }
        return .completed
    }

    /// What a plan step is told of the job it runs for.
    struct StepContext: Sendable {
        let jobID: Int64
        let sub: String
        let team: String
        let userID: Int64?
        let eventType: String?
    }

    /// One step of one job: its span and duration (JobMetrics.measure).
    private func measured(_ step: JobStep, _ body: () async throws -> Bool) async throws -> Bool {
        try await metrics.measure(step: step.name, jobID: step.jobID, body)
    }

    private func revokeTokens(_ job: ClaimedJob, sub: String, team: String, signOut: Bool, as step: JobStep) async throws -> Bool {
        guard let revoker else {
            let text = "the user has stored Apple tokens and this worker has no sign-in settings (SIWA_APPLE_TEAM_ID, SIWA_APPLE_KEY_ID, SIWA_APPLE_PRIVATE_KEY_FILE, SIWA_TOKEN_ENCRYPTION_KEYS_FILE) to revoke them"
            throw StepFailure(step: step.name, detail: text, summary: text, permanent: false)
        }
        return try await revoker.revoke(for: job, sub: sub, team: team, signOut: signOut, step: step)
    }

    private func eraseSiwaData(_ step: JobStep) async throws -> Bool {
        do {
            return try await purges.erasePersonalData([(step.jobID, step.lease)], completes: [step.completesJob]).contains(step.jobID)
        } catch {
            throw StepFailure(step: step.name, error: error)
        }
    }

    /// The job waits out a grace delay (`args.purge_after` in the future).
    static func waiting(_ parameters: PurgeParameters, now: Date = Date()) -> Bool {
        // siwa.utc_iso's form, 2026-12-24T10:00:00.123456Z: to the second is enough here.
        guard let text = parameters.purgeAfter, let due = try? Date(String(text.prefix(19)) + "Z", strategy: .iso8601) else {
            return false
        }
        return due > now
    }

    /// The revocation, the built-in step and the plan's, in order.
    public var stepNames: [String] { [AppleTokenStore.revokeStepName] + plan.allStepNames }

    /// The claimed batch's look-up and built-in step in one transaction (the
    /// queue's hot path: with no plan steps, the batch is done here). Its
    /// first statement finds each job's user and locks them; the built-in
    /// step then runs for the jobs it may run for. Returns the jobs that
    /// still have steps to run (the step now recorded for those it ran
    /// for), and those it completed. On an error nothing was recorded and
    /// every job is returned, to run (and fail, if it must) on its own.
    public func runBatchStep(for jobs: [ClaimedJob]) async -> BatchStepOutcome {
        let builtIn = PurgePlan.builtInStepName
        let revoke = AppleTokenStore.revokeStepName
        // Read as the runs will: a job whose args cannot be read fails on its own.
        let parameters = jobs.map { try? $0.parameters(as: PurgeParameters.self) }
        // Sign-outs, and jobs waiting out a grace delay, run one by one.
        let candidates = jobs.indices.filter { index in
            guard let job = parameters[index], !(job.appleSub ?? "").isEmpty, !(job.appleTeam ?? "").isEmpty else { return false }
            return !jobs[index].stepsDone.contains(builtIn) && !job.tokensOnly && !Self.waiting(job)
        }
        // The users of all but the sign-outs (which need none), for the runs too.
        let looked = jobs.indices.filter { parameters[$0].map { !$0.tokensOnly } ?? false }.map { jobs[$0] }
        guard !looked.isEmpty else { return BatchStepOutcome(left: jobs) }
        let plan = plan
        let eligible = candidates.map { jobs[$0] }
        let outcome: (targets: [Int64: PurgeTarget], chosen: [PurgeQueue.Erase], erased: Set<Int64>)
        do {
            if eligible.isEmpty {
                let found = try await purges.targets(of: looked.map(\.id))
                outcome = (found, [], [])
            } else {
                outcome = try await metrics.measure(step: builtIn, jobID: nil, batch: eligible.count) {
                    try await purges.lookUpAndErase(looked.map(\.id)) { found in
                        // Users with tokens run one by one: Apple revokes first.
                        eligible.filter { !(found[$0.id]?.holdsTokens ?? false) || $0.stepsDone.contains(revoke) }.map { job in
                            PurgeQueue.Erase(id: job.id, lease: job.lease,
                                             completes: plan.steps.allSatisfy { job.stepsDone.contains($0.name) })
                        }
                    }
                }
            }
        } catch {
            logger.debug("Built-in step for the batch failed; running the jobs one by one",
                         metadata: ["jobs": "\(eligible.count)", "error": "\(StepFailure(step: builtIn, error: error).summary)"])
            return BatchStepOutcome(left: jobs)
        }
        var result = BatchStepOutcome(left: [])
        for job in jobs {
            guard let erase = outcome.chosen.first(where: { $0.id == job.id }) else {
                if let target = outcome.targets[job.id] { targets.withLock { $0[job.lease] = target } }
                result.left.append(job)
                continue
            }
            // Not done: the lease was lost (the job was rescued); leave it.
            guard outcome.erased.contains(job.id) else { continue }
            if erase.completes {
                result.completed.append(job)
            } else {
                if let target = outcome.targets[job.id] { targets.withLock { $0[job.lease] = target } }
                result.left.append(job.recording(builtIn))
            }
        }
        return result
    }

    private func perform(_ planStep: PurgePlan.Step, as step: JobStep, context: StepContext) async throws -> Bool {
        let timeout = planStep.timeoutSeconds
        switch planStep.action {
        case .sql(let statements, nil):
            do {
                // The step's deadline covers its record too: a server that
                // never answers cannot hold the slot.
                return try await withTimeLimit(seconds: PurgePlan.clientDeadline(forSQLTimeout: timeout)) {
                    [queue = self.queue, purgeRole = self.purgeRole, logger = self.logger] in
                    try await queue.inStepTransaction(step) { connection in
                        try await PurgeJobRunner.run(statements, sub: context.sub, team: context.team, userID: context.userID, timeoutSeconds: timeout,
                                                     as: purgeRole, on: connection, logger: logger)
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
                try await withTimeLimit(seconds: PurgePlan.clientDeadline(forSQLTimeout: timeout)) { [logger = self.logger] in
                    try await client.withGuardedTransaction(logger: logger) { connection in
                        try await PurgeJobRunner.run(statements, sub: context.sub, team: context.team, userID: context.userID, timeoutSeconds: timeout,
                                                     on: connection, logger: logger)
                    }
                }
            } catch {
                throw StepFailure(step: step.name, error: error)
            }
            return try await queue.recordStep(step)
        case .http(let target):
            let body = Self.webhookBody(context)
            do {
                try await webhooks.deliver(to: target, id: Self.webhookID(jobID: context.jobID, step: step.name), body: body)
            } catch let failure as WebhookFailure {
                metrics.webhookFailed(step: step.name, statusClass: failure.statusClass.rawValue)
                throw StepFailure(step: step.name, detail: failure.description, summary: failure.description, permanent: false)
            }
            return try await queue.recordStep(step)
        }
    }

    /// Stable across retries, so the downstream can de-duplicate.
    public static func webhookID(jobID: Int64, step: String) -> String {
        "siwa-job-\(jobID)-\(step)"
    }

    /// `{"job_id","apple_sub","apple_team","user_id","event_type"}` (keys in this order).
    static func webhookBody(_ context: StepContext) -> Data {
        let userID = context.userID.map(String.init) ?? "null"
        let eventType = context.eventType.map(JSONText.quoted) ?? "null"
        return Data(#"{"job_id":\#(context.jobID),"apple_sub":\#(JSONText.quoted(context.sub)),"apple_team":\#(JSONText.quoted(context.team)),"user_id":\#(userID),"event_type":\#(eventType)}"#.utf8)
    }

    /// The statements of one step, in the caller's transaction, after
    /// `stepSettings` (the step's statement_timeout). On siwa's database
    /// (`role` set) they run as the purge role, and the connection's own
    /// role is back before the caller records the step.
    static func run(_ statements: [PurgePlan.SQLStatement], sub: String, team: String, userID: Int64?, timeoutSeconds: Double,
                    as role: String? = nil, on connection: PostgresConnection, logger: Logger) async throws {
        try await drain(stepSettings(timeoutSeconds: timeoutSeconds), on: connection, logger: logger)
        if let role { try await drain(PurgeRole.become(role), on: connection, logger: logger) }
        for statement in statements {
            var query = PostgresQuery(unsafeSQL: statement.text)
            if statement.parameterCount >= 1 { query.binds.append(sub) }
            if statement.parameterCount >= 2 { query.binds.append(userID) }
            if statement.parameterCount >= 3 { query.binds.append(team) }
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
