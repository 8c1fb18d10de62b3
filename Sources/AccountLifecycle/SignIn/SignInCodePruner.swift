import AccountStore
import Logging
import ServiceLifecycle

/// Forgets the codes of sign-ins past their retry window (`SignInCodes`):
/// at start, then every tenth of the window. A maintenance service of its
/// own, not the queue's: it knows nothing of jobs.
struct SignInCodePruner: PeriodicService {
    let codes: SignInCodes
    let logger: Logger

    var interval: Duration { .seconds(SignInStore.replayWindowSeconds / 10) }

    func runOnce() async {
        do {
            try await codes.prune()
        } catch {
            logger.debug("Maintenance skipped", metadata: ["error": "\(safeDescription(error))"])
        }
    }
}

extension SignInCodes {
    /// `siwa worker`'s service that prunes these codes (SignInCodePruner).
    public func pruner(logger: Logger) -> any Service {
        SignInCodePruner(codes: self, logger: logger)
    }
}
