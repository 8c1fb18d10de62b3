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

    public static func signature(id: String, timestamp: Int, body: Data, key: SymmetricKey) -> String {
        var signed = Data("\(id).\(timestamp).".utf8)
        signed.append(body)
        let mac = HMAC<SHA256>.authenticationCode(for: signed, using: key)
        return "v1," + Data(mac).base64EncodedString()
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

/// Sends purge webhooks (one POST per step and attempt; at-least-once).
public struct WebhookDelivery: Sendable {
    let http: HTTPClient

    public init(http: HTTPClient) { self.http = http }

    /// POSTs `body`, signed. The step's `timeoutSeconds` bounds the whole
    /// exchange: connecting, the answer's head and its body (a downstream
    /// that sends headers and then stalls fails the step at the deadline).
    /// Returns the status code (a 2xx); throws `WebhookFailure` otherwise.
    @discardableResult
    public func deliver(to target: PurgePlan.WebhookTarget, id: String, body: Data, now: Date = Date()) async throws -> Int {
        let timestamp = Int(now.timeIntervalSince1970)
        var request = HTTPClientRequest(url: target.url.absoluteString)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "siwa-worker")
        request.headers.add(name: "webhook-id", value: id)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        request.headers.add(name: "webhook-signature",
                            value: StandardWebhook.signature(id: id, timestamp: timestamp, body: body, key: target.key))
        request.body = .bytes(ByteBuffer(bytes: body))
        let host = target.url.host ?? "?"
        let seconds = target.timeoutSeconds
        let http = self.http
        let prepared = request
        let status: UInt
        do {
            // A little over the step's timeout: when AsyncHTTPClient's own
            // deadline (on connecting and the answer's head) fires first,
            // its error says what happened.
            status = try await withTimeLimit(seconds: seconds + 0.2) {
                // AsyncHTTPClient's deadline ends with the response head; the
                // time limit around both covers the body too.
                let response = try await http.execute(prepared, deadline: .now() + .nanoseconds(Int64(seconds * 1e9)))
                // Read the body (and drop it) so the connection can be reused;
                // past 1 MiB stop reading: the connection is closed instead.
                var received = 0
                for try await chunk in response.body {
                    received += chunk.readableBytes
                    if received > 1024 * 1024 { break }
                }
                return response.status.code
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
        guard (200..<300).contains(Int(status)) else {
            throw WebhookFailure(statusClass: .init(status: status), description: "\(host) answered HTTP \(status)")
        }
        return Int(status)
    }

    private static func short(_ error: any Error) -> String {
        String("\(error)".prefix(120))
    }
}
