import AsyncHTTPClient
import Foundation
import NIOHTTP1

/// Sorting Apple's HTTP answers, shared by `/auth/token` and `/auth/revoke`,
/// and the only words about them that may be logged: status codes, Apple's
/// error code, fixed sentences. Never the body itself.
enum AppleAnswer {
    enum Kind: Sendable {
        case ok(Data)
        case invalidGrant
        case invalidClient
        case rejected(status: Int, error: String?)
        case unavailable(retryAfter: Duration?, reason: String)
    }

    /// Apple answers `invalid_grant` and `invalid_client` with 400 (the
    /// latter sometimes 401); other 4xx are final refusals; 429 and 5xx
    /// mean "not now"; a 3xx (never followed) or anything else is no answer.
    static func sort(status: Int, headers: HTTPHeaders, body: Data) -> Kind {
        switch status {
        case 200..<300:
            return .ok(body)
        case 429, 500..<600:
            return .unavailable(retryAfter: retryAfter(headers["Retry-After"].first), reason: "status \(status)")
        case 400..<500:
            let code = errorCode(in: body)
            if code == "invalid_grant" { return .invalidGrant }
            if code == "invalid_client" || status == 401 { return .invalidClient }
            return .rejected(status: status, error: code)
        default:
            return .unavailable(retryAfter: nil, reason: "unexpected status \(status)")
        }
    }

    /// Apple's `error` field, when it is a short snake_case code; anything
    /// else (a long or odd string could echo what we sent) is dropped.
    static func errorCode(in body: Data) -> String? {
        struct ErrorBody: Decodable { let error: String }
        guard let code = try? JSONDecoder().decode(ErrorBody.self, from: body).error,
              (1...40).contains(code.utf8.count),
              code.utf8.allSatisfy({ (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || $0 == UInt8(ascii: "_") })
        else { return nil }
        return code
    }

    /// `Retry-After` as delta-seconds or an HTTP-date (RFC 9110 §10.2.3),
    /// capped at a day; nil when absent or unreadable.
    static func retryAfter(_ value: String?, now: Date = Date()) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int(value) { return seconds >= 0 ? .seconds(min(seconds, 86_400)) : nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: value) else { return nil }
        return .seconds(Int(min(max(date.timeIntervalSince(now), 0), 86_400).rounded(.up)))
    }

    /// A failed request in fixed words: AsyncHTTPClient's short description
    /// (no dynamic values by its contract), else the error's type.
    static func describe(_ error: any Error, timeout: Duration) -> String {
        if error is CancellationError { return "cancelled" }
        // AsyncHTTPClient's deadline is ours, and may fire before the sleep that races it.
        if let error = error as? HTTPClientError, error == .deadlineExceeded { return noAnswer(within: timeout) }
        if let error = error as? HTTPClientError { return "request failed: \(error.shortDescription)" }
        return "request failed: \(String(describing: type(of: error)))"
    }

    static func noAnswer(within timeout: Duration) -> String { "no complete answer within \(timeout / .seconds(1)) s" }

    static func describeRejection(status: Int, error: String?) -> String {
        "rejected (status \(status)\(error.map { ", \($0)" } ?? ""))"
    }

    static func describeUnavailable(retryAfter: Duration?, reason: String) -> String {
        "unavailable (\(reason)\(retryAfter.map { ", retry after \($0.components.seconds) s" } ?? ""))"
    }
}
