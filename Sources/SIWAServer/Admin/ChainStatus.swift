import AccountStore
import Foundation
import Logging

/// The audit chain's state for the page: a verification at most `maxAge`
/// old (it walks the whole log, so a page reload does not start another),
/// one at a time. `GET /admin/audit/verify` verifies afresh and updates it.
actor ChainStatus {
    /// As the page shows it: `state` is the stylesheet's class.
    struct View: Sendable {
        struct Head: Sendable { let seq: String; let hash: String }
        let state: String
        let summary: String
        let head: Head?
    }

    let verifier: AuditChainVerifier
    let maxAge: Duration
    let logger: Logger
    private var last: (report: AuditChainReport, at: Date, instant: ContinuousClock.Instant)?
    private var running: Task<AuditChainReport, any Error>?

    init(verifier: AuditChainVerifier, maxAge: Duration = .seconds(60), logger: Logger) {
        self.verifier = verifier
        self.maxAge = maxAge
        self.logger = logger
    }

    /// A fresh verification (`expectedHead`: a head recorded earlier that
    /// must still be in the chain).
    func verify(expectedHead: AuditChainLink? = nil) async throws -> AuditChainReport {
        let report = try await verifier.verify(expectedHead: expectedHead)
        if expectedHead == nil { last = (report, Date(), .now) }
        return report
    }

    func current() async -> View {
        if let last, ContinuousClock.now - last.instant < maxAge { return Self.view(last.report, at: last.at) }
        let task = running ?? Task { try await verifier.verify() }
        running = task
        defer { running = nil }
        do {
            let report = try await task.value
            last = (report, Date(), .now)
            return Self.view(report, at: Date())
        } catch {
            logger.warning("the audit chain could not be verified for the page", metadata: ["error": "\(safeDescription(error))"])
            return View(state: "unknown", summary: "not verified: the database did not answer", head: nil)
        }
    }

    static func view(_ report: AuditChainReport, at: Date) -> View {
        let head = report.head.map { View.Head(seq: String($0.seq), hash: $0.hashHex) }
        let checked = "checked \(AdminResponse.timestamp(at))"
        if let failure = report.failure {
            return View(state: "broken", summary: "BROKEN at seq \(failure.seq): \(failure.reason) (\(checked))", head: head)
        }
        let unsealed = report.unsealed > 0 ? ", \(report.unsealed) newer rows not sealed yet" : ""
        return View(state: "ok", summary: "verified: \(report.sealed) rows\(unsealed) (\(checked))", head: head)
    }
}
