import Foundation

/// siwa refused the request: its status and its one error shape,
/// `{"error": "<reason_code>", "detail": "<short sentence>"}`
/// (docs/http-api.md lists every code). A 503 is thrown once the retry
/// policy has given up.
public struct SIWARefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public let status: Int
    /// siwa's reason code (`invalid_grant`, `stale_identity_token`, `unavailable`, ...).
    public let code: String
    /// One of siwa's own sentences, never the request's bytes.
    public let detail: String
    /// `Retry-After`, when siwa sent it (a 503, a 409 `deletion_in_progress`).
    public let retryAfterSeconds: Int?

    public init(status: Int, code: String, detail: String, retryAfterSeconds: Int? = nil) {
        self.status = status
        self.code = code
        self.detail = detail
        self.retryAfterSeconds = retryAfterSeconds
    }

    public var description: String { "siwa answered \(status) \(code): \(detail)" }
}

/// The call did not get an answer from siwa it could use.
public enum SIWAClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The call's deadline passed (attempts, retries and waits included).
    case timedOut(after: Duration)
    /// No connection, or the connection failed (the transport's words).
    case unreachable(String)
    /// A status or body the API does not document (not siwa's API listener?).
    case unexpectedAnswer(status: Int, detail: String)

    public var description: String {
        switch self {
        case .timedOut(let limit): "siwa did not answer within \(limit)"
        case .unreachable(let what): "could not reach siwa: \(what)"
        case .unexpectedAnswer(let status, let detail): "siwa answered \(status), which the API does not document: \(detail)"
        }
    }
}
