import AccountStore
import AppleSignIn
import Foundation
import Logging
import Metrics
import ServiceLifecycle
import Synchronization

/// What one validation came to.
public enum TokenValidationResult: String, Sendable {
    /// Apple accepted the refresh token.
    case valid
    /// `invalid_grant`: the user revoked access or changed their password;
    /// the token is deleted and the user's session ends (no purge).
    case invalidGrant = "invalid_grant"
    /// Not recorded: validation is paused (too many `invalid_grant`
    /// answers; `siwa tokens resume-validation`). The token is due again later.
    case paused
    /// 5xx, 429, a network error, or a token siwa cannot decrypt: retried later.
    case undecided
    /// Apple refused siwa's own credentials: validation pauses.
    case invalidClient = "invalid_client"
    /// The user is signed out or deleted: not checked (the token's revocation is on the way).
    case skipped
}

/// `siwa worker`'s daily validation of stored refresh tokens (TN3194), at
/// most `requestsPerSecond` calls to Apple: it runs on the one worker
/// elected to lead maintenance (`MaintenanceLeader`), so the cap holds for
/// the deployment, not per worker.
public struct TokenValidator: Service {
    let queue: TokenValidationQueue
    let apple: AppleAuthClient
    let keyRing: TokenKeyRing
    /// Validation pauses past this many `invalid_grant` answers in the last 100.
    let invalidGrantPausePercent: Int
    /// nil: no cap.
    let requestsPerSecond: Int?
    let pollInterval: Duration
    let logger: Logger
    let outcomes: [TokenValidationResult: Counter]
    /// 1 while validation is paused.
    let pausedGauge: Gauge
    /// nil: no cap.
    let pacer: Pacer?
    let maintenance: MaintenanceMetrics

    /// After Apple refuses siwa's credentials, validation waits this long.
    static let invalidClientPause: Duration = .seconds(600)
    /// While paused, how often the worker looks whether an operator resumed it.
    static let resumeCheckInterval: Duration = .seconds(5)

    /// - Parameter pacer: the worker's one pacer of calls to Apple, shared
    ///   with the app transfer's jobs (`SIWA_APPLE_REQUESTS_PER_SECOND` is
    ///   one cap for both); nil: one of its own, from `settings`.
    public init(queue: TokenValidationQueue, apple: AppleAuthClient, keyRing: TokenKeyRing,
                settings: TokenValidationSettings, pollInterval: Duration = .seconds(30),
                logger: Logger, metrics: any MetricsFactory, maintenance: MaintenanceMetrics = .disabled, pacer: Pacer? = nil) {
        self.queue = queue
        self.apple = apple
        self.keyRing = keyRing
        invalidGrantPausePercent = settings.invalidGrantPausePercent
        requestsPerSecond = settings.requestsPerSecond
        self.pollInterval = pollInterval
        self.logger = logger
        self.maintenance = maintenance
        self.pacer = pacer ?? requestsPerSecond.map { Pacer(perSecond: $0) }
        outcomes = Dictionary(uniqueKeysWithValues: [TokenValidationResult.valid, .invalidGrant, .undecided, .invalidClient, .skipped,
                                                     .paused].map {
            ($0, Counter(label: "siwa_token_validations_total", dimensions: [("outcome", $0.rawValue)], factory: metrics))
        })
        pausedGauge = Gauge(label: "siwa_validation_paused", factory: metrics)
        pausedGauge.record(0)
    }

    public func run() async throws {
        // SIGTERM ends the poll's sleep and any call in flight at once (a
        // token claimed and not checked is due again a period later).
        await cancelWhenGracefulShutdown { await loop() }
        // Stopped (this worker no longer leads, or shuts down): the leader's
        // own gauge says whether validation is paused.
        pausedGauge.record(0)
    }

    private func loop() async {
        // A batch is a second's worth of calls (or 64 without a cap).
        let batch = requestsPerSecond.map { max(1, min($0, 500)) } ?? 64
        var pausedSince: Date?
        while !Task.isCancelled {
            var pause = pollInterval
            do {
                // Paused (by this worker or another): nothing is claimed
                // until an operator resumes; said once per pause, at error.
                if let paused = try await queue.pause() {
                    pausedGauge.record(1)
                    if pausedSince != paused.since {
                        pausedSince = paused.since
                        logger.error("Token validation is paused: \(paused.reason). Look into it (an incident at Apple, or your credentials), then run `siwa tokens resume-validation`")
                    }
                    try? await Task.sleep(for: Self.resumeCheckInterval)
                    continue
                }
                if pausedSince != nil { logger.notice("Token validation resumed") }
                pausedSince = nil
                pausedGauge.record(0)
                let due = try await queue.claimDue(limit: batch)
                let results = await validate(due)
                if results.contains(.invalidClient) {
                    pause = Self.invalidClientPause
                } else if results.contains(.paused) {
                    pause = .zero
                } else if due.count == batch {
                    pause = .zero
                }
            } catch {
                if Task.isCancelled { return }
                maintenance.failed(.tokenValidation)
                logger.error("Maintenance pass failed: token validation could not reach the database; it tries again next pass",
                             metadata: ["task": "\(MaintenanceTask.tokenValidation.rawValue)", "error": "\(safeDescription(error))"])
            }
            if pause > .zero { try? await Task.sleep(for: pause) }
        }
    }

    /// Validates `tokens`, paced to the cap across batches: no two calls
    /// start closer than 1 / requestsPerSecond, so no second of the run
    /// holds more calls than the cap.
    func validate(_ tokens: [DueAppleToken]) async -> [TokenValidationResult] {
        let stopped = StopFlag()
        return await withTaskGroup(of: TokenValidationResult.self) { group in
            var tried = 0
            for token in tokens {
                if let pacer, token.userIsActive { try? await Task.sleep(until: pacer.nextStart()) }
                // Stop early on invalid_client: the rest would fail the same way.
                if Task.isCancelled || stopped.isSet { break }
                group.addTask {
                    let result = await validate(token)
                    if result == .invalidClient || result == .paused { stopped.set() }
                    return result
                }
                tried += 1
            }
            var results: [TokenValidationResult] = []
            for await result in group { results.append(result) }
            // The tokens claimed but not tried (stopped, or shutting down)
            // are due again after the pause, not a whole period later.
            // After invalid_client they wait out the pause; after validation
            // paused, they are due as soon as it resumes.
            let wait = results.contains(.invalidClient) ? Double(Self.invalidClientPause.components.seconds) : 0
            for token in tokens.dropFirst(tried) {
                try? await queue.postpone(token, seconds: wait)
            }
            return results
        }
    }

    /// One token: ask Apple, record the answer.
    public func validate(_ token: DueAppleToken) async -> TokenValidationResult {
        let result = await check(token)
        outcomes[result]?.increment()
        return result
    }

    private func check(_ token: DueAppleToken) async -> TokenValidationResult {
        guard token.userIsActive else { return .skipped }
        let refreshToken: String
        do {
            refreshToken = try keyRing.open(SealedToken(keyID: token.keyID, bytes: token.refreshToken),
                                            userID: token.userID, clientID: token.clientID)
        } catch {
            logger.error("A stored refresh token cannot be decrypted; it is not used",
                         metadata: ["user_id": "\(token.userID)", "client_id": "\(token.clientID)", "error": "\(error)"])
            try? await queue.recordUndecided(token)
            return .undecided
        }
        do {
            switch await apple.refresh(refreshToken: refreshToken, clientID: token.clientID) {
            case .success(let response):
                let refresh = try keyRing.seal(refreshToken, userID: token.userID, clientID: token.clientID)
                let access = try keyRing.seal(response.accessToken, userID: token.userID, clientID: token.clientID)
                try await queue.recordValid(token, resealed: SealedTokenPair(
                    keyID: refresh.keyID, refreshToken: refresh.bytes, accessToken: access.bytes, accessExpiresIn: response.expiresIn))
                return .valid
            case .invalidGrant:
                switch try await queue.recordInvalidGrant(token, pausePercent: invalidGrantPausePercent) {
                case .sessionEnded, .gone:
                    logger.info("Apple no longer accepts a user's refresh token (invalid_grant): the token is deleted and the session ended",
                                metadata: ["user_id": "\(token.userID)", "client_id": "\(token.clientID)"])
                    return .invalidGrant
                case .paused:
                    // Due again once validation resumes (not a period later).
                    try await queue.postpone(token, seconds: 0)
                    return .paused
                }
            case .invalidClient:
                logger.error("Apple refused siwa's client credentials (invalid_client) during token validation; pausing validation",
                             metadata: ["client_id": "\(token.clientID)"])
                try await queue.postpone(token, seconds: Double(Self.invalidClientPause.components.seconds))
                return .invalidClient
            case .rejected(let status, let error):
                logger.warning("Apple refused a validation request", metadata: ["status": "\(status)", "error": "\(error ?? "-")"])
                try await queue.recordUndecided(token)
                return .undecided
            case .unavailable(let retryAfter, let reason):
                logger.debug("Apple could not validate a token now", metadata: ["reason": "\(reason)"])
                try await queue.recordUndecided(token, retryAfterSeconds: retryAfter.map { Double($0.components.seconds) })
                return .undecided
            }
        } catch {
            logger.warning("A validation result could not be stored", metadata: ["error": "\(safeDescription(error))"])
            return .undecided
        }
    }
}

/// Set once, read by every task of a batch.
private final class StopFlag: Sendable {
    private let flag = Mutex(false)
    var isSet: Bool { flag.withLock { $0 } }
    func set() { flag.withLock { $0 = true } }
}
