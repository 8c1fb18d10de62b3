import Foundation
import HTTPTypes
import OpenAPIRuntime

/// Turns every 4xx and 5xx into a `SIWARefusal` from siwa's one error
/// shape, before the generated code reads the body. The document lists each
/// route's reason codes as enumerations; decoding them there would make a
/// code a newer siwa adds an undecodable answer, where the caller needs
/// siwa's code and sentence whatever they are.
struct RefusalMiddleware: ClientMiddleware {
    /// siwa's refusals are a line of JSON; more is not siwa's.
    static let bodyLimit = 64 * 1024

    func intercept(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
                   next: (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)) async throws -> (HTTPResponse, HTTPBody?) {
        let (response, responseBody) = try await next(request, body, baseURL)
        guard response.status.code >= 400 else { return (response, responseBody) }
        struct ErrorShape: Decodable {
            let error: String
            let detail: String?
        }
        var bytes = Data()
        if let responseBody { bytes = try await Data(collecting: responseBody, upTo: Self.bodyLimit) }
        guard let shape = try? JSONDecoder().decode(ErrorShape.self, from: bytes) else {
            throw SIWAClientError.unexpectedAnswer(status: response.status.code, detail: "no {\"error\", \"detail\"} body")
        }
        throw SIWARefusal(status: response.status.code, code: shape.error, detail: shape.detail ?? "",
                          retryAfterSeconds: response.headerFields[.retryAfter].flatMap { Int($0) })
    }
}

/// ISO 8601 in UTC with or without fractional seconds: siwa writes
/// milliseconds in its answers (`2026-11-23T15:10:57.150Z`).
struct SIWADateTranscoder: DateTranscoder {
    func encode(_ date: Date) throws -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    func decode(_ text: String) throws -> Date {
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try Date.ISO8601FormatStyle().parse(text)
    }
}
