import AccountLifecycle
import HTTPTypes
import Hummingbird
import Logging

/// The id of one request, on its answer as `X-Request-Id` and on every log
/// line (`request_id`, through `RequestLogContext`) and span (`siwa.request_id`)
/// about it: the caller's own `X-Request-Id` when it is a sane token, else
/// the id Hummingbird gave the request (`hb.request.id`, which lines logged
/// with the request context's logger carry too).
public enum RequestIDHeader {
    public static let header = HTTPField.Name("X-Request-Id")!
    /// Long enough for a UUID, a trace id or a proxy's composite id; a
    /// longer one is not the caller's id but noise, and would weigh on every line.
    public static let maximumLength = 64

    /// The caller's id if it is 1 to `maximumLength` characters of
    /// `A-Z a-z 0-9 - _ . : + / =` (nothing that could break a log line, a
    /// header or a query), else nil. Reads the bytes in place: no copy.
    public static func sane(_ value: String?) -> String? {
        guard let value else { return nil }
        var count = 0
        for byte in value.utf8 {
            count += 1
            guard count <= maximumLength, isAllowed(byte) else { return nil }
        }
        return count == 0 ? nil : value
    }

    static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "+"), UInt8(ascii: "/"),
             UInt8(ascii: "="): true
        default: false
        }
    }

    /// The request's id, and its context's logger made to carry the
    /// caller's when that is the one taken.
    static func take<Context: RequestContext>(_ request: Request, _ context: inout Context) -> String {
        if let callers = sane(request.headers[header]) {
            context.logger[metadataKey: "hb.request.id"] = .string(callers)
            return callers
        }
        return context.id
    }
}

/// Gives every answer of a listener its `X-Request-Id` and runs the
/// request with `RequestLogContext` set. Added to each router first, so
/// that it wraps every route and the router's own 404; an error a route
/// throws is turned into its answer here, so it carries the id too.
public struct RequestIDMiddleware<Context: RequestContext>: RouterMiddleware {
    public init() {}

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let id = RequestIDHeader.take(request, &context)
        var response: Response
        do {
            response = try await RequestLogContext.$requestID.withValue(.string(id)) { try await next(request, context) }
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        } catch {
            // What Hummingbird would answer (a 500 with no body), with the id
            // the line about it carries.
            context.logger.error("Unanswered error", metadata: ["request_id": .string(id), "error": "\(String(describing: type(of: error)))"])
            response = Response(status: .internalServerError)
        }
        response.headers[RequestIDHeader.header] = id
        return response
    }
}
