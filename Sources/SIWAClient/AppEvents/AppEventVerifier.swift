import Crypto
import Foundation
import HTTPTypes

/// Checks that a delivery of siwa's app events webhook came from siwa and is
/// fresh, the Standard Webhooks way (standardwebhooks.com,
/// docs/app-events.md): HMAC-SHA256, keyed with the bytes under `whsec_`,
/// over `webhook-id + "." + webhook-timestamp + "." + body`, base64, equal
/// (in constant time) to one of the `webhook-signature` header's
/// space-separated `v1,` entries; and `webhook-timestamp` within
/// `tolerance` of now, so a delivery recorded and sent again later fails.
///
/// Written apart from siwa's signing code (AccountLifecycle's
/// StandardWebhook), so the suite's webhook tests check one against the other.
public struct AppEventVerifier: Sendable {
    /// Standard Webhooks' tolerance: a request older (or further ahead) than
    /// this is refused.
    public static let defaultTolerance: Duration = .seconds(300)

    private let keys: [SymmetricKey]
    public let tolerance: Duration

    /// - Parameter secrets: `SIWA_APP_WEBHOOK_SECRET` (`whsec_` + base64 of
    ///   24 to 64 bytes, as `siwa webhooks secret` makes it); during a
    ///   rotation give the new one too: a delivery signed with either passes.
    public init(secrets: [String], tolerance: Duration = defaultTolerance) throws(AppEventSecretError) {
        guard !secrets.isEmpty else { throw AppEventSecretError(description: "no webhook secret given") }
        keys = try secrets.map(Self.key(fromSecret:))
        self.tolerance = tolerance
    }

    public init(secret: String, tolerance: Duration = defaultTolerance) throws(AppEventSecretError) {
        try self.init(secrets: [secret], tolerance: tolerance)
    }

    /// The delivery's event, once its signature and timestamp check out.
    /// The body is the raw bytes as received: parsing and re-encoding it
    /// first would change what was signed.
    public func verify(id: String?, timestamp: String?, signature: String?, body: Data,
                       now: Date = Date()) throws(AppEventVerificationError) -> AppEvent {
        guard let id, !id.isEmpty else { throw .missingHeader("webhook-id") }
        guard let timestamp, !timestamp.isEmpty else { throw .missingHeader("webhook-timestamp") }
        guard let signature, !signature.isEmpty else { throw .missingHeader("webhook-signature") }
        // Unix seconds, digits only (a sign, a fraction or spaces are no
        // timestamp siwa sends).
        guard timestamp.utf8.count <= 12, timestamp.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let sent = Int64(timestamp) else {
            throw .malformedTimestamp
        }
        let offset = now.timeIntervalSince1970 - Double(sent)
        let limit = Double(tolerance.components.seconds)
        if offset > limit { throw .timestampTooOld(seconds: Int64(offset)) }
        if -offset > limit { throw .timestampInFuture(seconds: Int64(-offset)) }

        var signed = Data("\(id).\(timestamp).".utf8)
        signed.append(body)
        let macs = signature.split(separator: " ").compactMap { entry -> Data? in
            guard entry.hasPrefix("v1,") else { return nil }  // other schemes (v1a: asymmetric) are not siwa's
            return Data(base64Encoded: String(entry.dropFirst(3)))
        }
        let matches = macs.contains { mac in
            keys.contains { HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: signed, using: $0) }
        }
        guard matches else { throw .noMatchingSignature }
        do {
            return try AppEvent(id: id, body: body)
        } catch {
            throw .malformedBody
        }
    }

    /// As above, from the request's headers.
    public func verify(headers: HTTPFields, body: Data, now: Date = Date()) throws(AppEventVerificationError) -> AppEvent {
        func value(_ name: String) -> String? { headers.first { $0.name.canonicalName == name }?.value }
        return try verify(id: value("webhook-id"), timestamp: value("webhook-timestamp"), signature: value("webhook-signature"),
                          body: body, now: now)
    }

    /// `whsec_` + base64 of 24 to 64 bytes: the secrets siwa's worker takes,
    /// so one that siwa would refuse is refused here too.
    static func key(fromSecret secret: String) throws(AppEventSecretError) -> SymmetricKey {
        guard secret.hasPrefix("whsec_"), let bytes = Data(base64Encoded: String(secret.dropFirst(6))) else {
            throw AppEventSecretError(description: "a webhook secret is whsec_ followed by base64 (siwa webhooks secret makes one)")
        }
        guard (24...64).contains(bytes.count) else {
            throw AppEventSecretError(description: "the webhook secret holds \(bytes.count) bytes of key; expected 24 to 64")
        }
        return SymmetricKey(data: bytes)
    }
}

/// A secret that is not `whsec_` + base64 of 24 to 64 bytes.
public struct AppEventSecretError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
}

/// Why a delivery was refused. Answer each with a 4xx (400, or 401 for
/// `noMatchingSignature`): siwa retries a refused delivery, as it retries one
/// that failed, so a refusal never loses an event that siwa really sent.
public enum AppEventVerificationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// One of `webhook-id`, `webhook-timestamp`, `webhook-signature` is absent or empty.
    case missingHeader(String)
    /// `webhook-timestamp` is not Unix seconds.
    case malformedTimestamp
    /// Sent longer ago than the tolerance: a replayed request.
    case timestampTooOld(seconds: Int64)
    /// Dated ahead of now by more than the tolerance.
    case timestampInFuture(seconds: Int64)
    /// No `v1,` signature matches any of the secrets: not from siwa, or
    /// altered, or signed with a secret this verifier was not given.
    case noMatchingSignature
    /// Signed by siwa, yet not the envelope `{"type", "timestamp", "data"}`.
    case malformedBody

    public var description: String {
        switch self {
        case .missingHeader(let name): "the \(name) header is missing"
        case .malformedTimestamp: "webhook-timestamp is not Unix seconds"
        case .timestampTooOld(let seconds): "webhook-timestamp is \(seconds) s old, outside the tolerance"
        case .timestampInFuture(let seconds): "webhook-timestamp is \(seconds) s ahead, outside the tolerance"
        case .noMatchingSignature: "no webhook-signature matches the secret"
        case .malformedBody: "the body is not an app event envelope"
        }
    }
}
