import AccountLifecycle
import AppleSignIn
import Foundation
import Hummingbird

/// Small JSON answers; every error answer of siwa has this shape:
/// `{"error": "<reason_code>", "detail": "<short sentence>"}`.
/// Written by hand: a flat object of strings needs no serializer, and
/// Foundation's costs more than the rest of a request.
enum JSONResponse {
    static func make(_ status: HTTPResponse.Status, _ fields: KeyValuePairs<String, String>) -> Response {
        var json = "{"
        for (index, (key, value)) in fields.enumerated() {
            if index > 0 { json += "," }
            json += quoted(key) + ":" + quoted(value)
        }
        json += "}"
        return answer(status, ByteBuffer(string: json))
    }

    /// Any JSON answer of siwa's: the body as given, never cached.
    static func answer(_ status: HTTPResponse.Status, _ body: ByteBuffer) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    static func error(_ status: HTTPResponse.Status, reason: String, detail: String) -> Response {
        make(status, ["error": reason, "detail": detail])
    }

    static func quoted(_ text: String) -> String { JSONText.quoted(text) }
}
