import AccountStore
import Foundation
import Hummingbird
import Logging

/// The admins' questions as JSON, the same answers as `siwa audit --json`
/// (`AuditReports`): `GET /admin/audit?sub=&action=&since=&limit=`,
/// `GET /admin/users/{sub}/history?limit=`, `GET /admin/summary?days=`,
/// `GET /admin/audit/verify?head=SEQ:HASH`; and a user's deletion receipts,
/// as `siwa receipts show` (`GET /admin/receipts/{sub}`).
struct AdminReportRoutes: Sendable {
    let reports: AuditReports
    let receipts: DeletionReceipts
    let chain: ChainStatus
    let logger: Logger

    func register(on admin: RouterGroup<AdminRequestContext>) {
        admin.get("audit") { request, _ in
            await answer {
                let query = try AdminQuery(request, allowed: ["sub", "action", "actor", "since", "until", "before", "limit"])
                let before = try query.integer("before", in: 1...Int(Int64.max), default: 0)
                let filter = AuditFilter(appleSub: try query.sub(), action: try Self.action(query), actor: try Self.actor(query),
                                         since: try query.time("since"), until: try query.time("until"),
                                         beforeSeq: before == 0 ? nil : Int64(before),
                                         limit: try query.integer("limit", in: 1...10_000, default: 100))
                return try await Self.encode(["entries": reports.auditLog(filter)])
            }
        }
        admin.get("users/:sub/history") { request, context in
            await answer {
                let query = try AdminQuery(request, allowed: ["limit"])
                return try await Self.encode(reports.user(appleSub: try Self.pathSub(context),
                                                          limit: try query.integer("limit", in: 1...10_000, default: 1000)))
            }
        }
        admin.get("receipts/:sub") { request, context in
            await answer {
                _ = try AdminQuery(request, allowed: [])
                return AdminResponse.json(DeletionReceipts.List(receipts: try await receipts.forUser(try Self.pathSub(context))))
            }
        }
        admin.get("summary") { request, _ in
            await answer {
                let query = try AdminQuery(request, allowed: ["days"])
                return try await Self.encode(reports.summary(days: try query.integer("days", in: 1...AuditReports.maximumDays, default: 30)))
            }
        }
        admin.get("audit/verify") { request, _ in
            await answer {
                let query = try AdminQuery(request, allowed: ["head"])
                let head = try query.text("head").map { text throws(AdminQuery.Invalid) in
                    guard let link = AuditChainLink(text) else {
                        throw AdminQuery.Invalid(detail: "head must be SEQ:HASH as siwa audit head prints it (64 hex digits)")
                    }
                    return link
                }
                return Self.verification(try await chain.verify(expectedHead: head))
            }
        }
    }

    static func pathSub(_ context: AdminRequestContext) throws(AdminQuery.Invalid) -> String {
        guard let sub = context.parameters.get("sub"), APIResponse.isPlausibleSub(sub) else {
            throw AdminQuery.Invalid(detail: "the path must name an Apple sub (printable ASCII, at most 255 bytes)")
        }
        return sub
    }

    /// An action (`job.retry`), or a prefix ending in `*` (`job.*`).
    static func action(_ query: AdminQuery) throws(AdminQuery.Invalid) -> String? {
        guard let action = query.text("action") else { return nil }
        let name = action.hasSuffix("*") ? action.dropLast() : Substring(action)
        guard name.utf8.count <= 64, name.utf8.allSatisfy({ byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || [UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-")].contains(byte)
        }) else {
            throw AdminQuery.Invalid(detail: "action must be an action name (e.g. job.retry) or a prefix ending in * (job.*)")
        }
        return action
    }

    /// An actor (`admin`, `admin_key:ops-alice`), or a prefix ending in `*`.
    static func actor(_ query: AdminQuery) throws(AdminQuery.Invalid) -> String? {
        guard let actor = query.text("actor") else { return nil }
        guard actor.utf8.count <= 128, actor.unicodeScalars.allSatisfy({ (0x21...0x7E).contains($0.value) }) else {
            throw AdminQuery.Invalid(detail: "actor must be an actor (admin, api, worker, admin_key:NAME) or a prefix ending in *")
        }
        return actor
    }

    /// 200 either way: the verification ran (`ChainVerificationAnswer`).
    static func verification(_ report: AuditChainReport) -> Response {
        AdminResponse.json(ChainVerificationAnswer(report))
    }

    /// Indented, as `siwa audit --json` prints the same answers.
    static func encode(_ value: some Encodable) throws -> Response {
        JSONResponse.encoded(.ok, value, pretty: true)
    }

    private func answer(_ body: () async throws -> Response) async -> Response {
        do {
            return try await body()
        } catch let invalid as AdminQuery.Invalid {
            return AdminResponse.badParameter(invalid.detail)
        } catch {
            return AdminResponse.unavailable(error, logger: logger)
        }
    }
}
