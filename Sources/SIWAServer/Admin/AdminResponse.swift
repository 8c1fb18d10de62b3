import AccountStore
import Foundation
import Hummingbird
import Logging

/// The admin listener's answers: JSON (siwa's error shape,
/// `{"error", "detail"}`) and the page's HTML, none of them cached.
enum AdminResponse {
    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        JSONResponse.encoded(status, value)
    }

    static func error(_ status: HTTPResponse.Status, _ reason: String, _ detail: String) -> Response {
        JSONResponse.error(status, reason: reason, detail: detail)
    }

    static func badParameter(_ detail: String) -> Response {
        error(.badRequest, "bad_parameter", detail)
    }

    /// The database did not answer: 503, retry later (never a 500).
    static func unavailable(_ error: any Error, logger: Logger) -> Response {
        logger.warning("an admin request could not reach the database", metadata: ["error": "\(safeDescription(error))"])
        var response = Self.error(.serviceUnavailable, "unavailable", "the database is unavailable; retry later")
        response.headers[.retryAfter] = "5"
        return response
    }

    /// The page: under a Content-Security-Policy that allows its one inline
    /// stylesheet and form posts to itself, nothing else (no script at all).
    static func html(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[.contentSecurityPolicy] = AdminTemplates.contentSecurityPolicy
        headers[.xContentTypeOptions] = "nosniff"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// After a form's POST: back to the page (303: the browser GETs it).
    static func seeOther(_ location: String) -> Response {
        var headers = HTTPFields()
        headers[.location] = location
        headers[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: headers)
    }

    /// ISO 8601 in UTC, to the second, as the page and the JSON show times.
    static func timestamp(_ date: Date) -> String {
        UTCTime.text(date, .seconds)
    }
}

/// The query parameters of an admin route, each checked: an unknown or
/// repeated name, or a value out of its bounds, is a 400 with the reason.
struct AdminQuery {
    struct Invalid: Error { let detail: String }

    private let values: [String: String]

    init(_ request: Request, allowed: Set<String>) throws(Invalid) {
        var values: [String: String] = [:]
        for (name, value) in request.uri.queryParameters {
            let name = String(name)
            guard allowed.contains(name) else {
                let takes = allowed.isEmpty ? "no parameter" : allowed.sorted().joined(separator: ", ")
                throw Invalid(detail: "unknown parameter '\(name.prefix(40))'; this route takes \(takes)")
            }
            guard values[name] == nil else { throw Invalid(detail: "parameter '\(name)' given twice") }
            values[name] = String(value)
        }
        self.values = values
    }

    /// The value, nil when absent or empty.
    func text(_ name: String) -> String? {
        values[name].flatMap { $0.isEmpty ? nil : $0 }
    }

    func integer(_ name: String, in range: ClosedRange<Int>, default fallback: Int) throws(Invalid) -> Int {
        guard let text = text(name) else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            throw Invalid(detail: "\(name) must be a whole number in \(range.lowerBound)...\(range.upperBound), got '\(text.prefix(40))'")
        }
        return value
    }

    /// An Apple sub: printable ASCII, at most 255 bytes.
    func sub(_ name: String = "sub") throws(Invalid) -> String? {
        guard let text = text(name) else { return nil }
        guard APIResponse.isPlausibleSub(text) else { throw Invalid(detail: "\(name) must be an Apple sub (printable ASCII, at most 255 bytes)") }
        return text
    }

    /// A time: `2026-11-20`, or `2026-11-20T10:00:00Z` (an offset instead
    /// of Z, and fractions of a second, allowed).
    func time(_ name: String) throws(Invalid) -> Date? {
        guard let text = text(name) else { return nil }
        for format in Self.timeFormats {
            if let date = try? Date(text, strategy: format) { return date }
        }
        throw Invalid(detail: "\(name) must be an ISO 8601 time (2026-11-20 or 2026-11-20T10:00:00Z), got '\(text.prefix(40))'")
    }

    private static let timeFormats: [Date.ISO8601FormatStyle] = [
        .iso8601,
        Date.ISO8601FormatStyle(includingFractionalSeconds: true),
        Date.ISO8601FormatStyle().year().month().day(),
    ]
}
