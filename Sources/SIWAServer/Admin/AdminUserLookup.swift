import AccountStore
import Foundation
import Hummingbird
import Logging

/// `POST /admin/users/find`: the active users with exactly this email
/// address (support requests arrive by email), for the page's form (the
/// page again, with the user's history when one was found) or as JSON
/// (`{"email": "..."}` with a bearer key: `{"users": [...]}`).
///
/// A POST, so that the address is in no URL: none in the listener's or a
/// proxy's access log, nor in the browser's history. It is looked up by
/// sql/025's `siwa.find_user_by_email_by_key`, which writes the audit row
/// (`user.looked_up`, the key's name, the subs found) and keeps the
/// address nowhere, not even hashed; nor does any log line here hold it.
struct AdminUserLookup: Sendable {
    let users: UserAdministration
    let page: AdminPage
    let csrf: CSRFTokens
    let logger: Logger

    func register(on admin: RouterGroup<AdminRequestContext>) {
        admin.post("users/find") { request, context in await find(request, context) }
    }

    /// An address as typed: 3 to 320 characters (RFC 5321's longest
    /// path), one @ at least, no space or control character.
    static func isPlausibleEmail(_ text: String) -> Bool {
        (3...320).contains(text.utf8.count) && text.contains("@")
            && text.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value != 0x7F }
    }

    private func find(_ request: Request, _ context: AdminRequestContext) async -> Response {
        guard let identity = context.identity else { return AdminAuthMiddleware.unauthorized() }
        let fromPage = request.headers[.contentType]?.lowercased().hasPrefix("application/x-www-form-urlencoded") ?? false
        guard let body = try? await request.body.collect(upTo: AdminJobRoutes.formLimit) else {
            return AdminResponse.badParameter("the body must be at most \(AdminJobRoutes.formLimit) bytes")
        }
        let email: String
        var days = 14
        if fromPage || identity.ambient {
            if let refusal = AdminJobRoutes.crossSite(request) { return refusal }
            struct Form: Decodable { let csrf: String?; let email: String?; let days: Int? }
            let form = try? URLEncodedFormDecoder().decode(Form.self, from: String(buffer: body))
            if let refusal = AdminJobRoutes.badToken(form?.csrf, identity: identity, csrf: csrf) { return refusal }
            if let chosen = form?.days, (1...AuditReports.maximumDays).contains(chosen) { days = chosen }
            guard let typed = form?.email?.trimmingCharacters(in: .whitespaces), Self.isPlausibleEmail(typed) else {
                return await page.render(identity, days: days, sub: nil, team: nil, status: .badRequest,
                                         notice: .init(text: "That is not an email address: type the whole address.", isError: true))
            }
            email = typed
        } else {
            struct Query: Decodable { let email: String }
            guard let query = try? JSONDecoder().decode(Query.self, from: Data(String(buffer: body).utf8)), Self.isPlausibleEmail(query.email) else {
                return AdminResponse.badParameter("the body must be {\"email\": ADDRESS}, a whole email address")
            }
            email = query.email
        }
        let found: [UserFound]
        do {
            found = try await users.find(email: email, adminKeyID: identity.key.id)
        } catch {
            return AdminResponse.unavailable(error, logger: logger)
        }
        context.logger.notice("admin looked a user up by email address", metadata: ["found": "\(found.count)"])
        guard fromPage || identity.ambient else { return AdminResponse.json(UsersFound(users: found)) }
        let notice: AdminPageModel.Notice = switch found.count {
        case 0: .init(text: "No active user has that email address.", isError: false)
        case 1: .init(text: "One active user has that email address: \(found[0].appleSub) (team \(found[0].appleTeam)); their history is below.",
                      isError: false)
        default: .init(text: "\(found.count) active users have that email address: "
                       + found.map { "\($0.appleSub) (team \($0.appleTeam))" }.joined(separator: ", ") + ".", isError: false)
        }
        let only = found.count == 1 ? found.first : nil
        return await page.render(identity, days: days, sub: only?.appleSub, team: only?.appleTeam, status: .ok, notice: notice)
    }
}

struct UsersFound: Encodable {
    let users: [UserFound]
}
