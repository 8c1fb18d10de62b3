import AccountStore
import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1

/// Webhooks signed the Standard Webhooks way (standardwebhooks.com):
/// `webhook-id`, `webhook-timestamp` (Unix seconds) and
/// `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
public enum StandardWebhook {
    /// A secret as the spec writes it (`whsec_` + base64 of the key bytes),
    /// or any other string, whose UTF-8 bytes are then the key. At least 16
    /// bytes of key: a short secret is a guessable one.
    public static func key(fromSecret secret: String) throws -> SymmetricKey {
        let bytes: Data
        if secret.hasPrefix("whsec_") {
            guard let decoded = Data(base64Encoded: String(secret.dropFirst(6))) else {
                throw WebhookSecretError(description: "a whsec_ secret must be followed by base64")
            }
            bytes = decoded
        } else {
            bytes = Data(secret.utf8)
        }
        guard bytes.count >= 16 else { throw WebhookSecretError(description: "the secret is too short (at least 16 bytes of key)") }
        return SymmetricKey(data: bytes)
    }

    /// A secret exactly as the spec writes it, as the receivers' libraries
    /// read it: `whsec_` + base64 of 24 to 64 bytes of key.
    public static func strictKey(fromSecret secret: String) throws -> SymmetricKey {
        guard secret.hasPrefix("whsec_") else {
            throw WebhookSecretError(description: "expected whsec_ followed by base64 of 24 to 64 random bytes (siwa webhooks secret makes one)")
        }
        guard let bytes = Data(base64Encoded: String(secret.dropFirst(6))) else {
            throw WebhookSecretError(description: "a whsec_ secret must be followed by base64")
        }
        guard (24...64).contains(bytes.count) else {
            throw WebhookSecretError(description: "the secret holds \(bytes.count) bytes of key; expected 24 to 64 (siwa webhooks secret makes one)")
        }
        return SymmetricKey(data: bytes)
    }

    /// A fresh secret in the spec's form: `whsec_` + base64 of 32 random bytes.
    public static func newSecret() -> String {
        "whsec_" + SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }.base64EncodedString()
    }

    public static func signature(id: String, timestamp: Int, body: Data, key: SymmetricKey) -> String {
        var signed = Data("\(id).\(timestamp).".utf8)
        signed.append(body)
        let mac = HMAC<SHA256>.authenticationCode(for: signed, using: key)
        return "v1," + Data(mac).base64EncodedString()
    }

    /// The `webhook-signature` header for several keys (a rotation): their
    /// signatures, space-separated; a receiver accepts any one it can check.
    public static func signatures(id: String, timestamp: Int, body: Data, keys: [SymmetricKey]) -> String {
        keys.map { signature(id: id, timestamp: timestamp, body: body, key: $0) }.joined(separator: " ")
    }
}

public struct WebhookSecretError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// A downstream service did not take the webhook. The description names the
/// host and what happened, never the body (it holds the Apple sub and ids
/// only, but the rule is simpler kept whole).
public struct WebhookFailure: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as a metric label (a bounded set).
    public enum StatusClass: String, Sendable, CaseIterable {
        case redirection = "3xx", clientError = "4xx", serverError = "5xx", other = "other"
        case timeout, unreachable

        init(status: UInt) {
            switch status {
            case 300..<400: self = .redirection
            case 400..<500: self = .clientError
            case 500..<600: self = .serverError
            default: self = .other
            }
        }
    }

    public let statusClass: StatusClass
    public let description: String
}

/// Sends webhooks: the purge plan's HTTP steps and the app's events (one
/// POST per attempt; at-least-once).
public struct WebhookDelivery: Sendable {
    let http: HTTPClient

    public init(http: HTTPClient) { self.http = http }

    /// What the receiver answered: its status and the start of its body.
    public struct Answer: Sendable {
        public let status: Int
        /// At most `bodyLimit` bytes of it.
        public let body: Data
    }

    /// POSTs `body`, signed. The step's `timeoutSeconds` bounds the whole
    /// exchange: connecting, the answer's head and its body (a downstream
    /// that sends headers and then stalls fails the step at the deadline).
    /// Returns the status code (a 2xx); throws `WebhookFailure` otherwise.
    @discardableResult
    public func deliver(to target: PurgePlan.WebhookTarget, id: String, body: Data, now: Date = Date()) async throws -> Int {
        try await deliver(to: target.url, keys: [target.key], timeoutSeconds: target.timeoutSeconds, id: id, body: body, now: now)
    }

    /// As above, signed with each of `keys`; a 2xx or `WebhookFailure`.
    @discardableResult
    public func deliver(to url: URL, keys: [SymmetricKey], timeoutSeconds: Double, id: String, body: Data,
                        now: Date = Date()) async throws -> Int {
        let answer = try await post(to: url, keys: keys, timeoutSeconds: timeoutSeconds, id: id, body: body, now: now)
        guard (200..<300).contains(answer.status) else {
            throw WebhookFailure(statusClass: .init(status: UInt(answer.status)), description: "\(url.host ?? "?") answered HTTP \(answer.status)")
        }
        return answer.status
    }

    /// The signed POST and whatever it was answered (any status); throws
    /// `WebhookFailure` (`timeout`, `unreachable`) when there was no answer.
    public func post(to url: URL, keys: [SymmetricKey], timeoutSeconds seconds: Double, id: String, body: Data,
                     now: Date = Date(), bodyLimit: Int = 0) async throws -> Answer {
        let timestamp = Int(now.timeIntervalSince1970)
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "siwa-worker")
        request.headers.add(name: "webhook-id", value: id)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        request.headers.add(name: "webhook-signature",
                            value: StandardWebhook.signatures(id: id, timestamp: timestamp, body: body, keys: keys))
        request.body = .bytes(ByteBuffer(bytes: body))
        let host = url.host ?? "?"
        let http = self.http
        let prepared = request
        do {
            // A little over the step's timeout: when AsyncHTTPClient's own
            // deadline (on connecting and the answer's head) fires first,
            // its error says what happened.
            return try await withTimeLimit(seconds: seconds + 0.2) {
                // AsyncHTTPClient's deadline ends with the response head; the
                // time limit around both covers the body too.
                let response = try await http.execute(prepared, deadline: .now() + .nanoseconds(Int64(seconds * 1e9)))
                // Read the body (keeping its first `bodyLimit` bytes) so the
                // connection can be reused; past 1 MiB stop reading: the
                // connection is closed instead.
                var received = 0
                var kept = Data()
                for try await chunk in response.body {
                    if kept.count < bodyLimit { kept.append(contentsOf: chunk.readableBytesView.prefix(bodyLimit - kept.count)) }
                    received += chunk.readableBytes
                    if received > 1024 * 1024 { break }
                }
                return Answer(status: Int(response.status.code), body: kept)
            }
        } catch is TimeLimitExceeded {
            throw WebhookFailure(statusClass: .timeout, description: "timed out: \(host) did not answer within \(seconds.formattedSeconds) s")
        } catch let error as HTTPClientError where error == .deadlineExceeded {
            throw WebhookFailure(statusClass: .timeout, description: "timed out: \(host) did not answer within \(seconds.formattedSeconds) s")
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw WebhookFailure(statusClass: .unreachable, description: "could not reach \(host) (\(type(of: error)): \(Self.short(error)))")
        }
    }

    private static func short(_ error: any Error) -> String {
        String("\(error)".prefix(120))
    }
}
