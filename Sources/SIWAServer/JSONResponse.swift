import Foundation
import Hummingbird

/// Small JSON answers; every error answer of siwa has this shape:
/// `{"error": "<reason_code>", "detail": "<short sentence>"}`.
enum JSONResponse {
    static func make(_ status: HTTPResponse.Status, _ object: [String: any Sendable]) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func error(_ status: HTTPResponse.Status, reason: String, detail: String) -> Response {
        make(status, ["error": reason, "detail": detail])
    }
}
