import AccountStore
import AppleSignIn
import Foundation
import Logging
import Metrics

/// Why a notification body was refused: the body itself, or its token.
public enum Rejection: Error, Sendable, Equatable {
    case emptyBody
    case malformedBody
    case missingPayload
    case bodyTooLarge(limit: Int)
    case unreadableBody
    case token(VerificationFailure)

    public var reason: String {
        switch self {
        case .emptyBody: "empty_body"
        case .malformedBody: "malformed_body"
        case .missingPayload: "missing_payload"
        case .bodyTooLarge: "body_too_large"
        case .unreadableBody: "unreadable_body"
        case .token(let failure): failure.reason
        }
    }

    public var detail: String {
        switch self {
        case .emptyBody: "the request body is empty"
        case .malformedBody: "the body is not a JSON object"
        case .missingPayload: "the body has no string field \"payload\""
        case .bodyTooLarge(let limit): "the body is larger than \(limit) bytes"
        case .unreadableBody: "the request body could not be read"
        case .token(let failure): failure.detail
        }
    }
}

/// The result of one delivery, for the HTTP layer to turn into a status.
public enum ReceiveResult: Sendable, Equatable {
    /// Committed (or a duplicate of something committed): answer 200.
    case accepted(InboxOutcome, eventType: String)
    /// Verifiably bad: answer 400 with the reason.
    case rejected(Rejection)
    /// Cannot decide now (database or Apple's keys unreachable): answer 503 so Apple retries.
    case unavailable(String)
}

/// Verify, route, record: the whole path of one notification, short of HTTP.
public struct NotificationReceiver: Sendable {
    let verifier: NotificationVerifier
    let inbox: InboxWriter
    let rejections: RejectionLog
    let metrics: NotificationMetrics
    let logger: Logger

    public init(verifier: NotificationVerifier, inbox: InboxWriter, rejections: RejectionLog,
                metrics: any MetricsFactory, logger: Logger) {
        self.verifier = verifier
        self.inbox = inbox
        self.rejections = rejections
        self.metrics = NotificationMetrics(factory: metrics)
        self.logger = logger
    }

    public func receive(body: Data) async -> ReceiveResult {
        let token: String
        switch Self.payload(of: body) {
        case .success(let payload): token = payload
        case .failure(let rejection): return await reject(rejection, body: body)
        }

        let notification: AppleNotification
        do {
            notification = try await verifier.verify(token)
        } catch let failure as VerificationFailure {
            return await reject(.token(failure), body: body)
        } catch {
            logger.warning("Cannot verify a notification now", metadata: ["error": "\(error)"])
            count(outcome: "unavailable", type: "none")
            return .unavailable("Apple's signing keys are unavailable")
        }

        let type = Self.metricType(notification.event.type)
        do {
            let outcome = try await inbox.record(EventRouter.entry(for: notification))
            let label = outcome == .duplicate ? "duplicate" : "recorded"
            count(outcome: label, type: type)
            logger.info("Notification \(label)", metadata: ["jti": "\(notification.jti)", "type": "\(type)"])
            return .accepted(outcome, eventType: notification.event.type)
        } catch {
            count(outcome: "unavailable", type: type)
            let why = (error as? InboxUnavailable)?.reason ?? "database error"
            logger.warning("Cannot record a notification now", metadata: ["jti": "\(notification.jti)", "reason": "\(why)"])
            return .unavailable("the notification could not be recorded now (\(why))")
        }
    }

    /// Record a body refused before it was read whole: too large (the hash
    /// covers the part read; `announcedBytes` is the Content-Length when the
    /// body was refused unread), or unreadable.
    public func rejectUnread(_ rejection: Rejection, bodyPrefix: Data, announcedBytes: Int? = nil) async {
        _ = await reject(rejection, body: bodyPrefix, byteCount: announcedBytes)
    }

    /// The `payload` field of `{"payload": "<JWS>"}`.
    static func payload(of body: Data) -> Result<String, Rejection> {
        guard body.contains(where: { !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09) }) else { return .failure(.emptyBody) }
        if let token = compactPayload(of: body) { return .success(token) }
        guard let decoded = try? JSONDecoder().decode(NotificationBody.self, from: body) else { return .failure(.malformedBody) }
        guard let payload = decoded.payload, !payload.isEmpty else { return .failure(.missingPayload) }
        return .success(payload)
    }

    /// Apple's body as Apple writes it, `{"payload":"<JWS>"}` with no space
    /// and a token of base64url characters and dots, taken without a JSON
    /// parser (JSONDecoder cost 2% of a notification). Such a string holds
    /// no quote or escape, so this reads it exactly as the parser would;
    /// any other spelling goes to the parser.
    static func compactPayload(of body: Data) -> String? {
        let prefix = #"{"payload":""#.utf8
        let suffix = #""}"#.utf8
        guard body.count > prefix.count + suffix.count, body.starts(with: prefix), body.suffix(suffix.count).elementsEqual(suffix)
        else { return nil }
        let token = body.dropFirst(prefix.count).dropLast(suffix.count)
        let isTokenByte: (UInt8) -> Bool = { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "="): true
            default: false
            }
        }
        guard token.allSatisfy(isTokenByte) else { return nil }
        return String(decoding: token, as: UTF8.self)
    }

    private func reject(_ rejection: Rejection, body: Data, byteCount: Int? = nil) async -> ReceiveResult {
        count(outcome: "rejected", type: "none")
        logger.notice("Notification rejected", metadata: ["reason": "\(rejection.reason)"])
        // The answer is 400 whatever happens here: a rejection does not
        // depend on the database, so do not wait long for it.
        let (rejections, logger) = (self.rejections, self.logger)
        let recorded: Void? = await withDeadline(.seconds(2)) {
            try await rejections.record(reason: rejection.reason, detail: rejection.detail, body: body,
                                        byteCount: byteCount, logger: logger)
        }
        if recorded == nil {
            logger.warning("Could not record a rejection", metadata: ["reason": "\(rejection.reason)"])
        }
        return .rejected(rejection)
    }

    private func count(outcome: String, type: String) {
        metrics.count(outcome: outcome, type: type)
    }

    /// Event types as a metric label: the known ones, else "other" (a
    /// label must not take arbitrary values from the outside).
    static func metricType(_ type: String) -> String {
        AppleEventType(rawValue: type)?.rawValue ?? "other"
    }
}

/// Apple's body: `{"payload": "<JWS>"}`. A JSON object whose `payload` is
/// missing or not a string decodes with `payload == nil`.
struct NotificationBody: Decodable {
    let payload: String?
    enum CodingKeys: String, CodingKey { case payload }
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        payload = try? container.decode(String.self, forKey: .payload)
    }
}
