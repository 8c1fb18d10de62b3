import Foundation
import HTTPTypes
import OpenAPIRuntime

extension SIWAClient {
    /// When the client sends a request again. siwa answers 503 `unavailable`
    /// with `Retry-After` when it cannot decide now (Apple unreachable or slow,
    /// the database unavailable), and docs/http-api.md asks the backend to send
    /// the same request again: a retried sign-in gets the stored answer if the
    /// first attempt was stored after all (siwa keeps the answer for the same
    /// authorization code ten minutes), `invalid_grant` if nothing was; a
    /// lookup and a deletion are idempotent. Nothing else is retried: a 4xx is
    /// siwa's decision, and a 409 `deletion_in_progress` (also with
    /// `Retry-After`) is for the app to tell the user, not to wait out here.
    public struct RetryPolicy: Sendable, Equatable {
        /// Attempts in all, the first one included (1: never retry).
        public var maxAttempts: Int
        /// The wait when a 503 has no usable `Retry-After`.
        public var defaultDelay: Duration
        /// The longest wait, whatever `Retry-After` asks.
        public var maxDelay: Duration

        public init(maxAttempts: Int = 3, defaultDelay: Duration = .seconds(1), maxDelay: Duration = .seconds(10)) {
            self.maxAttempts = max(1, maxAttempts)
            self.defaultDelay = defaultDelay
            self.maxDelay = maxDelay
        }

        /// One attempt: a 503 is answered to the caller as it came.
        public static let never = RetryPolicy(maxAttempts: 1)

        /// The wait before the next attempt after a 503 with this `Retry-After`
        /// (delta-seconds; siwa sends no HTTP date, so one is read as absent).
        public func delay(retryAfter: String?) -> Duration {
            guard let text = retryAfter?.trimmingCharacters(in: .whitespaces), let seconds = Int(text), seconds >= 0 else {
                return min(defaultDelay, maxDelay)
            }
            return min(.seconds(seconds), maxDelay)
        }
    }
}

/// The retry rule, as a middleware of the generated client: a 503 is sent
/// again after `Retry-After`, while attempts remain and the wait ends before
/// the call's deadline; else the 503 goes up to the caller.
struct RetryMiddleware: ClientMiddleware {
    let policy: SIWAClient.RetryPolicy
    /// The whole call's budget, retries and waits included.
    let deadline: Duration

    func intercept(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
                   next: (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)) async throws -> (HTTPResponse, HTTPBody?) {
        let clock = ContinuousClock()
        let end = clock.now + deadline
        // The generated client's JSON bodies are bytes in memory, sent again
        // as they are; a body that can be read once only is never retried.
        let retryable = body.map { $0.iterationBehavior == .multiple } ?? true
        var attempt = 1
        while true {
            let (response, responseBody) = try await next(request, body, baseURL)
            guard response.status.code == 503, retryable, attempt < policy.maxAttempts else { return (response, responseBody) }
            let wait = policy.delay(retryAfter: response.headerFields[.retryAfter])
            guard clock.now + wait < end else { return (response, responseBody) }
            // Read the refusal (siwa's is a line of JSON) so the connection
            // is free for the next attempt.
            if let responseBody { _ = try? await Data(collecting: responseBody, upTo: 64 * 1024) }
            try await Task.sleep(for: wait)
            attempt += 1
        }
    }
}

/// `Authorization: Bearer KEY` on every request: the API key of
/// `siwa api-keys create` (scope `app`).
struct BearerMiddleware: ClientMiddleware {
    let apiKey: String

    func intercept(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
                   next: (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.authorization] = "Bearer \(apiKey)"
        return try await next(request, body, baseURL)
    }
}

/// Runs `body`, or throws `SIWAClientError.timedOut` once `limit` has
/// passed (the body is cancelled). The transport's timeout ends at the
/// answer's head; this bounds the whole call, the answer's body, the
/// retries and their waits included.
func withDeadline<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw SIWAClientError.timedOut(after: limit) }
        return value
    }
}
