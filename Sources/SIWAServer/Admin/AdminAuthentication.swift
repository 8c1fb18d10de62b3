import AccountStore
import Foundation
import Hummingbird
import HummingbirdAuth
import Logging
import Metrics
import NIOCore

/// Who an admin request came from: a live key of the `admin` scope, and
/// how it was presented.
public struct AdminIdentity: Sendable {
    public let key: APIKeyIdentity
    /// Basic credentials: a browser, which sends them on its own with every
    /// request to the origin, so its POSTs must also carry a CSRF token.
    /// A bearer header is never sent by a browser on its own.
    public let ambient: Bool
}

/// The admin listener's request context: the identity (hummingbird-auth's
/// `AuthRequestContext`) and the peer's address, for the failure limit.
public struct AdminRequestContext: AuthRequestContext, RequestContext {
    public var coreContext: CoreRequestContextStorage
    public var identity: AdminIdentity?
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        identity = nil
        remoteAddress = source.channel.remoteAddress
    }
}

/// Lets an admin request through only with a live key of the `admin`
/// scope, as `Authorization: Bearer KEY` or HTTP Basic with the key as the
/// password (any user name), so that a browser can open the page.
///
/// - no credentials: 401 with `WWW-Authenticate: Basic realm="siwa admin"`
///   (the browser asks for the key) and `Bearer`; counted
///   (`reason="missing"`), not held against the address: a browser's first
///   request always comes without.
/// - a wrong, revoked or malformed key: the same 401, counted
///   (`reason="invalid"`) and held against the key's prefix (a malformed
///   key: against one prefix of its own for all of them) and the address.
/// - an app key: 403 `{"error":"forbidden"}`, counted
///   (`reason="wrong_scope"`) and held against its prefix and the address.
/// - a key prefix past SIWA_ADMIN_AUTH_FAILURES_PER_MINUTE, or an address
///   past four times that: 429 with `Retry-After` before the key is looked
///   up, counted in `siwa_admin_auth_refused_total`. Every admin behind
///   the ssh tunnel comes from 127.0.0.1: one admin mistyping their key
///   locks out that key, not the others.
/// - the database not answering: 503 with `Retry-After`.
///
/// Each request that gets through is logged once with the key's name
/// (reads: this log line; changes: an audit row as well, by the route).
public struct AdminAuthMiddleware: RouterMiddleware {
    public typealias Context = AdminRequestContext
    let verifier: APIKeyVerifier
    let limiter: AuthFailureLimiter
    let failures: @Sendable (String) -> Void
    let refusals: Counter

    public init(verifier: APIKeyVerifier, limiter: AuthFailureLimiter, metrics: any MetricsFactory) {
        self.verifier = verifier
        self.limiter = limiter
        let counters = Dictionary(uniqueKeysWithValues: ["missing", "invalid", "wrong_scope"].map {
            ($0, Counter(label: "siwa_admin_auth_failures_total", dimensions: [("reason", $0)], factory: metrics))
        })
        failures = { counters[$0]?.increment() }
        refusals = Counter(label: "siwa_admin_auth_refused_total", factory: metrics)
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let address = AuthFailureLimiter.Address(context.remoteAddress)
        if let wait = limiter.refusal(for: address) {
            return refused("too many failed authentications from this address; retry after \(wait) s", wait: wait)
        }
        guard let presented = Self.credentials(request.headers[.authorization]) else {
            failures("missing")
            return Self.unauthorized()
        }
        let prefix = Self.keyPrefix(presented.key)
        if let wait = limiter.refusal(forKeyPrefix: prefix) {
            return refused("too many failed authentications with this key; retry after \(wait) s", wait: wait)
        }
        let key: APIKeyIdentity?
        do {
            key = try await verifier.authenticate(bearer: presented.key)
        } catch {
            context.logger.warning("could not check an admin key", metadata: ["error": "\(safeDescription(error))"])
            var response = AdminResponse.error(.serviceUnavailable, "unavailable",
                                               "the key cannot be checked now (database unavailable); retry later")
            response.headers[.retryAfter] = "5"
            return response
        }
        guard let key else {
            fail("invalid", address: address, prefix: prefix, context: context)
            return Self.unauthorized()
        }
        guard key.scope == .admin else {
            fail("wrong_scope", address: address, prefix: prefix, context: context)
            return AdminResponse.error(.forbidden, "forbidden",
                                       "this is an app key: the admin listener takes an admin key (siwa api-keys create NAME --scope admin)")
        }
        var context = context
        context.identity = AdminIdentity(key: key, ambient: presented.ambient)
        context.logger[metadataKey: "api_key"] = "\(key.name)"
        let response = try await next(request, context)
        context.logger.info("admin request", metadata: [
            "method": "\(request.method)", "path": "\(request.uri.path)", "query": "\(request.uri.query ?? "")",
            "status": "\(response.status.code)", "address": "\(address)",
        ])
        return response
    }

    private func refused(_ detail: String, wait: Int) -> Response {
        refusals.increment()
        var response = AdminResponse.error(.tooManyRequests, "too_many_failures", detail)
        response.headers[.retryAfter] = String(wait)
        return response
    }

    private func fail(_ reason: String, address: AuthFailureLimiter.Address, prefix: String, context: Context) {
        failures(reason)
        if limiter.recordFailure(keyPrefix: prefix) {
            context.logger.warning("admin authentications with this key prefix refused for the rest of the minute",
                                   metadata: ["key_prefix": "\(prefix)", "address": "\(address)", "reason": "\(reason)"])
        }
        if limiter.recordFailure(address) {
            context.logger.warning("admin authentications from this address refused for the rest of the minute",
                                   metadata: ["address": "\(address)", "reason": "\(reason)"])
        }
    }

    /// What a failure is counted against besides the address: the key's
    /// prefix (which may be shown: it finds the row, it opens nothing), or
    /// for anything that is not a well-formed key, one count shared by all
    /// of those (so a malformed guess cannot name a prefix of its choosing).
    static func keyPrefix(_ key: String) -> String {
        APIKeyFormat(parsing: key).map { "siwa_\($0.prefix)" } ?? "malformed"
    }

    /// The key from `Bearer KEY`, or the password of `Basic` (any user
    /// name, an empty one too); `ambient` for Basic. hummingbird-auth's
    /// parsers (`headers.basic`, `headers.bearer`) do not fit: they refuse
    /// an empty user name (what a browser's prompt sends when only the
    /// password is filled in) and a scheme not written in their case, which
    /// RFC 9110 §11.1 allows.
    static func credentials(_ header: String?) -> (key: String, ambient: Bool)? {
        if let bearer = APIKeyMiddleware<APIKeyContext>.bearer(header) { return (bearer, false) }
        guard let header, header.utf8.count > 6, header.prefix(6).lowercased() == "basic ",
              let decoded = Data(base64Encoded: header.dropFirst(6).trimmingCharacters(in: .whitespaces)),
              let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":") else { return nil }
        let password = String(text[text.index(after: colon)...])
        return password.isEmpty ? nil : (password, true)
    }

    static func unauthorized() -> Response {
        var response = AdminResponse.error(.unauthorized, "unauthorized",
                                           "an admin key is required: Authorization: Bearer KEY, or Basic with the key as the password")
        response.headers[values: .wwwAuthenticate] = [#"Basic realm="siwa admin", charset="UTF-8""#, #"Bearer realm="siwa admin""#]
        return response
    }
}
