import AccountLifecycle
import AccountStore
import Foundation
import Logging

/// The audit chain's state for the page: a verification at most `maxAge`
/// old (it walks the whole log, so a page reload does not start another),
/// one at a time. The walk runs in serve, beside Apple's notifications: it
/// is paced like the worker's (`rowsPerSecond`), and the page waits for it
/// at most `pageWait`; a longer walk goes on in the background, and the
/// page says so (with the last result, if any) until it is done.
/// `GET /admin/audit/verify` verifies afresh, unpaced, and updates it.
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
    let pageWait: Duration
    let rowsPerSecond: Int?
    let logger: Logger
    private var last: (report: AuditChainReport, at: Date, instant: ContinuousClock.Instant)?
    /// The walk under way, since when; nil once it ended (its result in `last`).
    private var running: (walk: Task<AuditChainReport?, Never>, since: Date)?

    init(verifier: AuditChainVerifier, maxAge: Duration = .seconds(60), pageWait: Duration = .seconds(2),
         rowsPerSecond: Int? = AuditChainWatch.rowsPerSecond, logger: Logger) {
        self.verifier = verifier
        self.maxAge = maxAge
        self.pageWait = pageWait
        self.rowsPerSecond = rowsPerSecond
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
        let walk = running?.walk ?? startWalk()
        if let report = await withDeadline(pageWait, { await walk.value }) ?? nil { return Self.view(report, at: Date()) }
        let note = running.map {
            "being verified since \(AdminResponse.timestamp($0.since)) (the whole log, at most "
                + "\(rowsPerSecond.map(String.init) ?? "all") rows a second): reload the page in a while"
        } ?? "not verified: the database did not answer"
        guard let last else { return View(state: "unknown", summary: note, head: nil) }
        let previous = Self.view(last.report, at: last.at)
        return View(state: previous.state, summary: previous.summary + "; now " + note, head: previous.head)
    }

    private func startWalk() -> Task<AuditChainReport?, Never> {
        let verifier = verifier, rowsPerSecond = rowsPerSecond, logger = logger
        let walk = Task { () -> AuditChainReport? in
            do {
                let report = try await verifier.verify(rowsPerSecond: rowsPerSecond)
                self.finished(report)
                return report
            } catch {
                logger.warning("the audit chain could not be verified for the page", metadata: ["error": "\(safeDescription(error))"])
                self.finished(nil)
                return nil
            }
        }
        running = (walk, Date())
        return walk
    }

    private func finished(_ report: AuditChainReport?) {
        if let report { last = (report, Date(), .now) }
        running = nil
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
