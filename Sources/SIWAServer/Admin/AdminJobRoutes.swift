import AccountLifecycle
import AccountStore
import Foundation
import Hummingbird
import Logging

/// `GET /admin/jobs?state=&limit=`, `POST /admin/jobs/{id}/retry`,
/// `POST /admin/jobs/{id}/cancel` and `POST /admin/jobs/{id}/run-now`: what
/// `siwa jobs` does, with the key's name as the audit row's actor
/// (`admin_key:NAME`), through `siwa.change_job_by_key` (sql/017), the
/// only write on the jobs serve's role may make for an admin.
///
/// A POST is JSON for a client with a bearer key. From the page (a form,
/// Basic credentials) it must carry the page's CSRF token and come from
/// the page's own origin; it then answers 303 back to the page.
struct AdminJobRoutes: Sendable {
    let jobs: JobAdministration
    let csrf: CSRFTokens
    let logger: Logger

    static let formLimit = 4096

    func register(on admin: RouterGroup<AdminRequestContext>) {
        admin.get("jobs") { request, _ in
            do {
                let query = try AdminQuery(request, allowed: ["state", "kind", "limit"])
                let state = try query.text("state").map { text throws(AdminQuery.Invalid) in
                    guard let state = JobState(rawValue: text) else {
                        throw AdminQuery.Invalid(detail: "state must be one of \(JobState.allCases.map(\.rawValue).joined(separator: ", "))")
                    }
                    return state
                }
                let kind = try query.text("kind").map { text throws(AdminQuery.Invalid) in
                    guard JobKinds.contains(text) else {
                        throw AdminQuery.Invalid(detail: "kind must be a job kind's name (\(JobKinds.listed))")
                    }
                    return text
                }
                let limit = try query.integer("limit", in: 1...1000, default: 100)
                return AdminResponse.json(JobsAnswer(jobs: try await jobs.list(state: state, kind: kind, limit: limit)))
            } catch let invalid as AdminQuery.Invalid {
                return AdminResponse.badParameter(invalid.detail)
            } catch {
                return AdminResponse.unavailable(error, logger: logger)
            }
        }
        admin.post("jobs/:id/retry") { request, context in
            await change(request, context) { try await jobs.retry(id: $0, by: $1) }
        }
        admin.post("jobs/:id/cancel") { request, context in
            await change(request, context) { try await jobs.cancel(id: $0, by: $1) }
        }
        admin.post("jobs/:id/run-now") { request, context in
            await change(request, context, notice: "run_now") { try await jobs.runNow(id: $0, by: $1) }
        }
    }

    /// `notice`: what the page says after the change (default: from the job's new state).
    private func change(_ request: Request, _ context: AdminRequestContext, notice: String? = nil,
                        _ action: (Int64, JobActor) async throws -> JobSummary) async -> Response {
        guard let identity = context.identity else { return AdminAuthMiddleware.unauthorized() }
        guard let id = context.parameters.get("id").flatMap(Int64.init), id > 0 else {
            return AdminResponse.badParameter("the job id must be a positive whole number")
        }
        let fromPage = request.headers[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") ?? false
        if identity.ambient || fromPage {
            if let refusal = await checkForm(request, identity: identity) { return refusal }
        }
        do {
            let job = try await action(id, .adminKey(identity.key))
            context.logger.notice("admin changed a job", metadata: ["job_id": "\(id)", "state": "\(job.state.rawValue)"])
            if fromPage {
                return AdminResponse.seeOther("/admin?notice=\(notice ?? (job.state == .cancelled ? "cancelled" : "retried"))&job=\(id)")
            }
            return AdminResponse.json(JobAnswer(job: job))
        } catch let refused as JobAdministrationError {
            let (status, code): (HTTPResponse.Status, String) = switch refused.kind {
            case .notFound: (.notFound, "not_found")
            case .conflict: (.conflict, "conflict")
            case .forbidden: (.forbidden, "forbidden")
            }
            // The page shows the job's state now, and why it was not changed.
            if fromPage { return AdminResponse.seeOther("/admin?notice=refused&job=\(id)") }
            return AdminResponse.error(status, code, refused.description)
        } catch {
            return AdminResponse.unavailable(error, logger: logger)
        }
    }

    /// A browser's POST: not from another site, and with this key's token.
    private func checkForm(_ request: Request, identity: AdminIdentity) async -> Response? {
        if let refusal = Self.crossSite(request) { return refusal }
        struct Form: Decodable { let csrf: String? }
        let body = try? await request.body.collect(upTo: Self.formLimit)
        let form = body.flatMap { try? URLEncodedFormDecoder().decode(Form.self, from: String(buffer: $0)) }
        return Self.badToken(form?.csrf, identity: identity, csrf: csrf)
    }

    /// A POST another site's page made the browser send: refused.
    static func crossSite(_ request: Request) -> Response? {
        let fetchSite = request.headers.first { $0.name.canonicalName == "sec-fetch-site" }?.value
        if let fetchSite, !["same-origin", "none"].contains(fetchSite) {
            return AdminResponse.error(.forbidden, "cross_site", "a change must come from the admin page itself")
        }
        if let origin = request.headers[.origin], let host = request.head.authority, origin != "http://\(host)" {
            return AdminResponse.error(.forbidden, "cross_site", "a change must come from the admin page itself (Origin \(origin.prefix(80)))")
        }
        return nil
    }

    /// A form's CSRF token that is missing, expired or another key's: refused.
    static func badToken(_ token: String?, identity: AdminIdentity, csrf: CSRFTokens) -> Response? {
        guard let token, csrf.isValid(token, for: identity.key) else {
            return AdminResponse.error(.forbidden, "bad_csrf_token",
                                       "the form's token is missing, expired or not this key's: reload the page and try again")
        }
        return nil
    }
}
