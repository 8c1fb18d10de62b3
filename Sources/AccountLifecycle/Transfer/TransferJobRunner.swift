import AccountStore
import AppleSignIn
import Foundation
import Logging

/// What the app transfer's two job kinds share (`siwa worker` makes it
/// when sign-in is configured): Apple's user migration endpoints, the team
/// of each client this worker has a key for, the worker's one pacer of
/// calls to Apple, and whether this worker leads maintenance.
public struct TransferRunnerResources: Sendable {
    public let migration: AppleUserMigration
    /// The team whose key signs a client's secrets (SIWA_APPLE_TEAM_ID, or
    /// the client's in SIWA_APPLE_CLIENTS_FILE): the sending team's while
    /// preparing, the receiving team's while completing (the operator
    /// switches them).
    public let teamOfClient: @Sendable (String) -> String?
    /// nil: no cap (SIWA_APPLE_REQUESTS_PER_SECOND=0).
    public let pacer: Pacer?
    public let leadership: MaintenanceLeadership
    public let store: TransferStore

    public init(apple: AppleAuthClient, teamOfClient: @escaping @Sendable (String) -> String?, pacer: Pacer?,
                leadership: MaintenanceLeadership, store: TransferStore) {
        self.migration = AppleUserMigration(client: apple)
        self.teamOfClient = teamOfClient
        self.pacer = pacer
        self.leadership = leadership
        self.store = store
    }

    /// Claimed only on the worker that leads maintenance, where token
    /// validation runs too: one pacer, one SIWA_APPLE_REQUESTS_PER_SECOND
    /// for the deployment. (The shared claim, for this kind alone.)
    func claim(kind: String, queue: JobQueue, limit: Int, leaseSeconds: Double) async throws -> [ClaimedJob] {
        guard leadership.isLeading else { return [] }
        return try await queue.claim(limit: limit, kinds: [kind], leaseSeconds: leaseSeconds)
    }

    /// `call` at the pacer's next slot (cancellation stops the wait).
    func paced<Value: Sendable>(_ call: () async -> Value) async throws -> Value {
        if let pacer { try await Task.sleep(until: pacer.nextStart(), clock: .continuous) }
        return await call()
    }

    /// Apple did not answer with a success: the reason is kept on the user
    /// (`siwa transfer status` shows it). A final answer (`invalid_grant`,
    /// another 4xx) marks the user failed and ends the job; anything else
    /// fails the attempt, retried with the jobs' backoff (RetryPolicy).
    func refused<Value: Sendable & Equatable>(_ outcome: AppleMigrationOutcome<Value>, job: ClaimedJob, queue: JobQueue, parameters: some TransferJobParameters,
                        phase: String, step: String) async throws -> JobRunOutcome {
        let reason = outcome.description
        try await store.recordRefusal(userID: parameters.userID, phase: phase, team: parameters.team, reason: reason,
                                      isFinal: !outcome.isRetryable)
        if outcome.isRetryable { throw StepFailure(step: step, detail: reason, summary: reason, permanent: false) }
        return try await Self.complete(job, queue: queue)
    }

    /// A refusal that retrying cannot mend (this worker's settings are the
    /// other team's): kept on the user, and the job discarded.
    func misconfigured(_ text: String, parameters: some TransferJobParameters, phase: String, step: String) async throws -> Never {
        try await store.recordRefusal(userID: parameters.userID, phase: phase, team: parameters.team, reason: text, isFinal: false)
        throw StepFailure(step: step, detail: text, summary: text, permanent: true)
    }

    static func complete(_ job: ClaimedJob, queue: JobQueue) async throws -> JobRunOutcome {
        try await queue.complete(job) ? .completed : .leaseLost
    }
}

/// The `transfer_prepare` job kind, the sending team's half: for one user,
/// Apple's `transfer_sub` toward the receiving team (`siwa transfer prepare`
/// enqueues one per user). A rerun, or a job whose user is done meanwhile,
/// completes without a call.
public struct TransferPrepareRunner: SelfClaimingJobKindRunner {
    public typealias Parameters = TransferPrepareParameters
    public static let stepName = "transfer.prepare"
    static let phase = "prepare"

    let queue: JobQueue
    let transfer: TransferRunnerResources
    let metrics: JobMetrics

    public static func make(_ resources: JobKindResources) -> (any JobKindRunner)? {
        resources.transfer.map { TransferPrepareRunner(queue: resources.queue, transfer: $0, metrics: resources.metrics) }
    }

    public var stepNames: [String] { [Self.stepName] }

    public func claim(limit: Int, leaseSeconds: Double) async throws -> [ClaimedJob] {
        try await transfer.claim(kind: Self.kind, queue: queue, limit: limit, leaseSeconds: leaseSeconds)
    }

    public func run(_ job: ClaimedJob, _ parameters: TransferPrepareParameters) async throws -> JobRunOutcome {
        guard let user = try await transfer.store.user(parameters.userID), user.phase == Self.phase, user.team == parameters.team,
              user.state != "done" else {
            // Done already (a rerun, a job left over), or prepared since for another team.
            return try await TransferRunnerResources.complete(job, queue: queue)
        }
        guard let sub = user.appleSub, !user.gone else {
            try await transfer.store.recordRefusal(userID: parameters.userID, phase: Self.phase, team: parameters.team,
                                                   reason: "the user was deleted before the transfer was prepared", isFinal: true)
            return try await TransferRunnerResources.complete(job, queue: queue)
        }
        let sending = transfer.teamOfClient(parameters.clientID)
        guard sending != parameters.team, sending != nil, sending == user.appleTeam else {
            try await transfer.misconfigured(
                sending == parameters.team
                    ? "this worker's key for \(parameters.clientID) is team \(parameters.team)'s, the team the app moves to: transfer identifiers are asked for with the sending team's settings"
                    : "this worker has no key of the user's team \(user.appleTeam ?? "?") for \(parameters.clientID): transfer identifiers are asked for with the sending team's settings",
                parameters: parameters, phase: Self.phase, step: Self.stepName)
        }
        let outcome = try await metrics.measure(step: Self.stepName, jobID: job.id) {
            try await transfer.paced { await transfer.migration.transferSub(of: sub, target: parameters.team, clientID: parameters.clientID) }
        }
        guard case .success(let transferSub) = outcome else {
            return try await transfer.refused(outcome, job: job, queue: queue, parameters: parameters, phase: Self.phase, step: Self.stepName)
        }
        try await transfer.store.recordTransferSub(userID: parameters.userID, team: parameters.team, transferSub: transferSub)
        return try await TransferRunnerResources.complete(job, queue: queue)
    }
}

/// The `transfer_complete` job kind, the receiving team's half: for one
/// user awaiting completion, Apple's new `sub` (and relay address) for the
/// stored `transfer_sub`, and the move to it in place
/// (siwa.complete_user_transfer: same id and data, `user.transferred`
/// audited, its app event). A user a sign-in linked first is done: its job
/// completes without a call.
public struct TransferCompleteRunner: SelfClaimingJobKindRunner {
    public typealias Parameters = TransferCompleteParameters
    public static let stepName = "transfer.complete"
    static let phase = "complete"

    let queue: JobQueue
    let transfer: TransferRunnerResources
    let metrics: JobMetrics
    let logger: Logger

    public static func make(_ resources: JobKindResources) -> (any JobKindRunner)? {
        resources.transfer.map {
            TransferCompleteRunner(queue: resources.queue, transfer: $0, metrics: resources.metrics, logger: Logger(label: "siwa.transfer"))
        }
    }

    public var stepNames: [String] { [Self.stepName] }

    public func claim(limit: Int, leaseSeconds: Double) async throws -> [ClaimedJob] {
        try await transfer.claim(kind: Self.kind, queue: queue, limit: limit, leaseSeconds: leaseSeconds)
    }

    public func run(_ job: ClaimedJob, _ parameters: TransferCompleteParameters) async throws -> JobRunOutcome {
        guard let user = try await transfer.store.user(parameters.userID), user.phase == Self.phase, user.team == parameters.team,
              user.state != "done", let transferSub = user.transferSub else {
            // Moved already (a sign-in linked it, or a rerun), or no longer awaiting.
            return try await TransferRunnerResources.complete(job, queue: queue)
        }
        if user.gone {
            try await transfer.store.recordRefusal(userID: parameters.userID, phase: Self.phase, team: parameters.team,
                                                   reason: "the user was deleted before the transfer completed", isFinal: true)
            return try await TransferRunnerResources.complete(job, queue: queue)
        }
        let receiving = transfer.teamOfClient(parameters.clientID)
        guard receiving == parameters.team else {
            try await transfer.misconfigured(
                "this worker's key for \(parameters.clientID) is team \(receiving ?? "none")'s, not \(parameters.team): switch the settings to the receiving team's (team id, key id, key) before siwa transfer complete",
                parameters: parameters, phase: Self.phase, step: Self.stepName)
        }
        let outcome = try await metrics.measure(step: Self.stepName, jobID: job.id) {
            try await transfer.paced { await transfer.migration.exchange(transferSub: transferSub, clientID: parameters.clientID) }
        }
        guard case .success(let moved) = outcome else {
            return try await transfer.refused(outcome, job: job, queue: queue, parameters: parameters, phase: Self.phase, step: Self.stepName)
        }
        let result = try await transfer.store.complete(userID: parameters.userID, transferSub: transferSub, team: parameters.team,
                                                       newSub: moved.sub, email: moved.email, isPrivateEmail: moved.isPrivateEmail)
        if result != "moved" && result != "already_done" {
            logger.notice("A transferred user was not moved", metadata: ["user_id": "\(parameters.userID)", "outcome": "\(result)"])
        }
        return try await TransferRunnerResources.complete(job, queue: queue)
    }
}
