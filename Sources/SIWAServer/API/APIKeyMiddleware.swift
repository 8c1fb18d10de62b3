import AccountStore
import Hummingbird
import Logging

/// A request context that carries the API key the request came with.
public protocol APIKeyAuthenticatedContext: RequestContext {
    /// Set by `APIKeyMiddleware` before the route runs; nil only on a route
    /// the middleware does not guard.
    var apiKey: APIKeyIdentity? { get set }
}

/// The context of the `/v1` routes: a group of the `BasicRequestContext`
/// router, e.g.
/// `router.group("v1", context: APIKeyContext.self).add(middleware: APIKeyMiddleware(verifier: verifier))`.
public struct APIKeyContext: ChildRequestContext, APIKeyAuthenticatedContext {
    public var coreContext: CoreRequestContextStorage
    public var apiKey: APIKeyIdentity?

    public init(context: BasicRequestContext) {
        coreContext = context.coreContext
        apiKey = nil
    }
}

/// Lets a request through only with a live API key of the `app` scope in
/// `Authorization: Bearer KEY`, and hands the route its identity
/// (`context.apiKey`).
///
/// An admin key (scope `admin`) is 403 `{"error":"forbidden"}` here: it
/// opens the admin listener only, so an admin's key cannot sign users in
/// or delete them, as the app's key cannot read the audit trail.
///
/// A missing, malformed, unknown, revoked or wrong key: 401
/// `{"error":"unauthorized"}` with `WWW-Authenticate: Bearer` (the same
/// answer for each, so it tells a prober nothing). The database not
/// answering: 503 `{"error":"unavailable"}` with `Retry-After`, never 500:
/// the caller may retry, and a good key is not refused for our outage.
public struct APIKeyMiddleware<Context: APIKeyAuthenticatedContext>: RouterMiddleware {
    let verifier: APIKeyVerifier

    public init(verifier: APIKeyVerifier) {
        self.verifier = verifier
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let bearer = Self.bearer(request.headers[.authorization]) else { return Self.unauthorized() }
        let identity: APIKeyIdentity?
        do {
            identity = try await verifier.authenticate(bearer: bearer)
        } catch {
            context.logger.warning("could not check an API key", metadata: ["error": "\(safeDescription(error))"])
            return Self.unavailable()
        }
        guard let identity else { return Self.unauthorized() }
        guard identity.scope == .app else {
            context.logger.notice("an admin API key was refused on /v1", metadata: ["api_key": "\(identity.name)"])
            return JSONResponse.error(.forbidden, reason: "forbidden",
                                      detail: "this is an admin key: /v1 takes an app key (siwa api-keys create NAME --scope app)")
        }
        var context = context
        context.apiKey = identity
        context.logger[metadataKey: "api_key"] = "\(identity.name)"
        return try await next(request, context)
    }

    /// The credentials of `Bearer <credentials>` (the scheme in any case,
    /// RFC 9110 §11.1); nil for any other header.
    static func bearer(_ header: String?) -> String? {
        guard let header, header.utf8.count > 7, header.prefix(7).lowercased() == "bearer " else { return nil }
        let credentials = header.dropFirst(7).trimmingCharacters(in: .whitespaces)
        return credentials.isEmpty ? nil : credentials
    }

    static func unauthorized() -> Response {
        var response = JSONResponse.error(.unauthorized, reason: "unauthorized",
                                          detail: "a live API key is required: Authorization: Bearer KEY (siwa api-keys create)")
        response.headers[.wwwAuthenticate] = "Bearer"
        return response
    }

    static func unavailable() -> Response {
        var response = JSONResponse.error(.serviceUnavailable, reason: "unavailable",
                                          detail: "the API key cannot be checked now (database unavailable); retry later")
        response.headers[.retryAfter] = "5"
        return response
    }
}
