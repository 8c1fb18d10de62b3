import AccountStore
import AppleSignIn
import Foundation
import Hummingbird

/// Every JSON answer of siwa's, never cached: a Codable value encoded by
/// `AnswerJSON` (`encoded`), or one of the few whose documented key order
/// is not sorted (`ordered`: siwa's error shape, `/healthz`, `/readyz`, the
/// notification's 200), written by hand in that order: flat objects of
/// strings need no serializer, and these answer junk floods and probes.
/// AnswerBytesTests checks them against `AnswerJSON.inOrder`.
enum JSONResponse {
    static func make(_ status: HTTPResponse.Status, _ fields: KeyValuePairs<String, String>) -> Response {
        answer(status, ByteBuffer(string: ordered(fields)))
    }

    /// A flat object of strings, keys in the order given.
    static func ordered(_ fields: KeyValuePairs<String, String>) -> String {
        var json = "{"
        for (index, (key, value)) in fields.enumerated() {
            if index > 0 { json += "," }
            json += JSONText.quoted(key) + ":" + JSONText.quoted(value)
        }
        return json + "}"
    }

    /// `value` as `AnswerJSON` encodes it (`pretty`: indented, as the admin
    /// audit answers and `siwa audit --json` have always been).
    static func encoded(_ status: HTTPResponse.Status, _ value: some Encodable, pretty: Bool = false) -> Response {
        // Only a non-finite number fails to encode; none of siwa's answers holds one.
        let data = (try? pretty ? AnswerJSON.pretty(value) : AnswerJSON.encode(value)) ?? Data("{}".utf8)
        return answer(status, ByteBuffer(bytes: data))
    }

    /// Any JSON answer of siwa's: the body as given, never cached.
    static func answer(_ status: HTTPResponse.Status, _ body: ByteBuffer) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    static func error(_ status: HTTPResponse.Status, reason: String, detail: String) -> Response {
        answer(status, ByteBuffer(string: ErrorAnswer(reason, detail).json))
    }
}

/// siwa's one error shape, `{"error": "<reason_code>", "detail": "<short
/// sentence>"}`, in that order (docs/http-api.md).
public struct ErrorAnswer: Encodable, Sendable, Equatable {
    public let error: String
    public let detail: String

    public init(_ error: String, _ detail: String) {
        self.error = error
        self.detail = detail
    }

    /// Written by hand in the documented order (`JSONResponse.ordered`).
    public var json: String { JSONResponse.ordered(["error": error, "detail": detail]) }
}
