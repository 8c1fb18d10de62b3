import AccountStore
import Logging
import ServiceLifecycle

/// `siwa worker`'s part in the audit chain, on the worker elected to lead
/// maintenance (`MaintenanceLeader`; the sealer's own per-transaction lock
/// still keeps any other caller, and a leader on its way out, from sealing
/// beside it): seals the log each second (`AuditSealer`) and logs the
/// chain's head at start and every `headLogInterval` (SIWA_AUDIT_HEAD_LOG_MINUTES), so that
/// heads end up in the journal, away from the database, for
/// `siwa audit verify --head`. With receipts on, each logged head is also
/// signed with the receipt key (`signed_head`, SignedAuditHead): a head
/// nobody can forge without the key. On the same clock as the plain head,
/// not per N seals: the anchor's worth is how little of the tail is
/// unanchored at any time, which is a matter of time whatever the load,
/// and a line every few minutes costs the journal nothing.
public struct AuditChainKeeper: Service {
    let sealer: AuditSealer
    /// Signs the logged heads (the worker's receipt signer); nil: receipts off.
    let headSigner: DeletionReceiptSigner?
    let headLogInterval: Duration
    let sealInterval: Duration
    let metrics: MaintenanceMetrics
    let logger: Logger
    /// Rows sealed per transaction; a backlog is sealed in such batches back to back.
    static let batch = 5000

    public init(sealer: AuditSealer, headSigner: DeletionReceiptSigner? = nil, headLogInterval: Duration,
                sealInterval: Duration = .seconds(1), metrics: MaintenanceMetrics = .disabled, logger: Logger) {
        self.sealer = sealer
        self.headSigner = headSigner
        self.headLogInterval = headLogInterval
        self.sealInterval = sealInterval
        self.metrics = metrics
        self.logger = logger
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown { await loop() }
    }

    private func loop() async {
        let clock = ContinuousClock()
        var nextHeadLog = clock.now
        var failures = 0
        while !Task.isCancelled {
            var pause = sealInterval
            do {
                if try await sealer.seal(maxRows: Self.batch) == Self.batch { pause = .zero }
                if clock.now >= nextHeadLog {
                    nextHeadLog = clock.now + headLogInterval
                    try await logHead()
                }
                if failures > 0 { logger.notice("Sealing the audit log again") }
                failures = 0
            } catch {
                if Task.isCancelled { return }
                failures += 1
                metrics.failed(.auditSealer)
                // Every failed pass is counted; the log says so the first
                // time and every 60th (a pass a second would flood it).
                if failures == 1 || failures % 60 == 0 {
                    logger.error("Maintenance pass failed: cannot seal the audit log; retrying",
                                 metadata: ["task": "\(MaintenanceTask.auditSealer.rawValue)", "error": "\(safeDescription(error))",
                                            "failures": "\(failures)"])
                }
            }
            if pause > .zero { try? await Task.sleep(for: pause) }
        }
    }

    private func logHead() async throws {
        let (head, unsealed) = try await sealer.head()
        // At notice: a head is evidence kept away from the database, and must
        // reach the journal at the level production logs at.
        var metadata: Logger.Metadata = ["head": "\(head?.description ?? "none")", "unsealed": "\(unsealed)"]
        if let headSigner, let sealed = try await sealer.sealedHead() {
            metadata["signed_head"] = "\(try headSigner.sign(head: sealed.head, sealedAt: sealed.sealedAt))"
        }
        logger.notice("Audit chain head", metadata: metadata)
    }
}
