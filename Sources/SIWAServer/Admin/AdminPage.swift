import AccountStore
import Foundation
import Hummingbird
import Logging

/// `GET /admin`: the one page. Server-rendered from the templates, no
/// script: the charts of the last days, what needs attention with its
/// retry and cancel buttons, a user's history, the audit chain's state.
struct AdminPage: Sendable {
    let reports: AuditReports
    let chain: ChainStatus
    let jobs: JobAdministration
    let csrf: CSRFTokens
    let logger: Logger

    static let dayChoices = [7, 14, 30, 90]
    static let historyLimit = 500

    func register(on admin: RouterGroup<AdminRequestContext>) {
        admin.get { request, context in await show(request, context) }
    }

    private func show(_ request: Request, _ context: AdminRequestContext) async -> Response {
        guard let identity = context.identity else { return AdminAuthMiddleware.unauthorized() }
        let days: Int, notice: AdminPageModel.Notice?, sub: String?
        do {
            let query = try AdminQuery(request, allowed: ["days", "sub", "notice", "job"])
            days = try query.integer("days", in: 1...AuditReports.maximumDays, default: 14)
            notice = try await self.notice(query)
            do {
                sub = try query.sub()
            } catch {
                // A typo in the search box: the page again, saying why.
                return await render(identity, days: days, sub: nil, team: nil, status: .badRequest,
                                    notice: .init(text: error.detail, isError: true))
            }
        } catch let invalid as AdminQuery.Invalid {
            return AdminResponse.badParameter(invalid.detail)
        } catch {
            return AdminResponse.unavailable(error, logger: logger)
        }
        return await render(identity, days: days, sub: sub, team: nil, status: .ok, notice: notice)
    }

    /// The page; with `sub`, that user's history (in `team`, else every team's rows).
    func render(_ identity: AdminIdentity, days: Int, sub: String?, team: String?, status: HTTPResponse.Status,
                notice: AdminPageModel.Notice?) async -> Response {
        do {
            async let summary = reports.summary(days: days)
            async let chainState = chain.current()
            var history: UserReport?
            if let sub { history = try await reports.user(appleSub: sub, team: team, limit: Self.historyLimit) }
            let model = AdminPageModel(
                keyName: identity.key.name, csrf: csrf.token(for: identity.key), now: Date(), days: days,
                summary: try await summary, history: history, chain: await chainState, notice: notice)
            return AdminResponse.html(AdminTemplates.library.render(model, withTemplate: "page") ?? "", status: status)
        } catch {
            return AdminResponse.unavailable(error, logger: logger)
        }
    }

    /// After a form's POST: what became of the job.
    private func notice(_ query: AdminQuery) async throws -> AdminPageModel.Notice? {
        // `job` is checked with or without a notice: a value out of bounds
        // is a 400, as on every admin route, never silently ignored.
        let id = try query.integer("job", in: 1...Int(Int64.max), default: 0)
        guard let kind = query.text("notice") else { return nil }
        let done = ["retried": "retried", "cancelled": "cancelled", "run_now": "set to run now"]
        guard done[kind] != nil || kind == "refused", id > 0 else {
            throw AdminQuery.Invalid(detail: "notice must be retried, cancelled, run_now or refused, with job")
        }
        guard let job = try await jobs.show(id: Int64(id)) else { return .init(text: "No job \(id).", isError: true) }
        guard let text = done[kind] else {
            return .init(text: "Job \(id) was not changed: it is \(job.state.rawValue), to run at \(AdminResponse.timestamp(job.runAt)).",
                         isError: true)
        }
        return .init(text: "Job \(id) \(text): it is \(job.state.rawValue) now.", isError: false)
    }
}
