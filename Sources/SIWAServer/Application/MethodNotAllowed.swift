import Hummingbird

extension Router {
    /// Answers a request for a known path with a method it does not have 405
    /// `method_not_allowed`, with `Allow` listing the methods it has (RFC
    /// 9110 §15.5.6), where Hummingbird answers 404. Call it last, once every
    /// route is added: a middleware added after the routes wraps none of
    /// them, only the router's "no route" answer, so a request that has a
    /// route never reaches it.
    func answeringMethodNotAllowed() {
        add(middleware: MethodNotAllowedMiddleware(routes: routes.map { ($0.path, $0.method) }))
    }
}

/// The methods each path of a router has; a request no route took is a 405
/// when its path has some, and stays a 404 when it has none.
struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    private let routes: [(path: RouterPath, method: HTTPRequest.Method)]

    init(routes: [(path: RouterPath, method: HTTPRequest.Method)]) {
        self.routes = routes
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let allowed = allowedMethods(request.uri.path)
        guard !allowed.isEmpty, !allowed.contains(request.method.rawValue) else { return try await next(request, context) }
        let methods = allowed.joined(separator: ", ")
        var response = JSONResponse.error(.methodNotAllowed, reason: "method_not_allowed", detail: "This path answers \(methods) only.")
        response.headers[.allow] = methods
        return response
    }

    /// The methods of the routes whose path matches `path`, sorted, once each.
    func allowedMethods(_ path: String) -> [String] {
        let segments = path.split(separator: "/")
        return Set(routes.filter { Self.matches($0.path, segments) }.map(\.method.rawValue)).sorted()
    }

    /// Whether a route's path takes these segments, as the router's trie would.
    static func matches(_ route: RouterPath, _ segments: [Substring]) -> Bool {
        var index = 0
        for element in route.components {
            if element == .recursiveWildcard { return true }
            guard index < segments.count, element ~= segments[index] else { return false }
            index += 1
        }
        return index == segments.count
    }
}
