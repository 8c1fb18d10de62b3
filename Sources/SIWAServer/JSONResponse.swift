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
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: json)))
    }

    static func error(_ status: HTTPResponse.Status, reason: String, detail: String) -> Response {
        make(status, ["error": reason, "detail": detail])
    }

    /// A JSON string literal (RFC 8259 §7).
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
