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
    public let description: String
}

/// Sends purge webhooks (one POST per step and attempt; at-least-once).
public struct WebhookDelivery: Sendable {
    let http: HTTPClient

    public init(http: HTTPClient) { self.http = http }

    public func deliver(to target: PurgePlan.WebhookTarget, id: String, body: Data, now: Date = Date()) async throws {
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
        let response: HTTPClientResponse
        do {
            response = try await http.execute(request, timeout: .milliseconds(Int64(target.timeoutSeconds * 1000)))
        } catch let error as HTTPClientError where error == .deadlineExceeded {
            throw WebhookFailure(description: "\(host) did not answer within \(target.timeoutSeconds) s")
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw WebhookFailure(description: "could not reach \(host) (\(type(of: error)): \(Self.short(error)))")
        }
        // Read (and drop) the body so the connection can be reused.
        _ = try? await response.body.collect(upTo: 64 * 1024)
        guard (200..<300).contains(Int(response.status.code)) else {
            throw WebhookFailure(description: "\(host) answered HTTP \(response.status.code)")
        }
    }

    private static func short(_ error: any Error) -> String {
        String("\(error)".prefix(120))
    }
}
