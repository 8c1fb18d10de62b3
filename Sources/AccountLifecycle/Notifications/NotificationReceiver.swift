import AccountStore
import AppleSignIn
import Foundation
import Logging
import Metrics
import Tracing

/// Why a notification was refused, as answered and recorded: a reason code
/// and a sentence. The domain's own refusals are its token's (`token(_:)`);
/// the HTTP layer adds those of the body itself (SIWAServer's
/// BodyRejections.swift), which it reads before any token.
public struct Rejection: Error, Sendable, Equatable {
    public let reason: String
    public let detail: String

    public init(reason: String, detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public static func token(_ failure: VerificationFailure) -> Rejection {
        Rejection(reason: failure.reason, detail: failure.detail)
    }
}

/// The result of one delivery, for the HTTP layer to turn into a status.
public enum ReceiveResult: Sendable, Equatable {
    /// Committed (or a duplicate of something committed): answer 200,
    /// naming the client (`aud`) and its team.
    case accepted(InboxOutcome, eventType: String, team: String, clientID: String)
    /// Verifiably bad: answer 400 with the reason.
    case rejected(Rejection)
    /// Cannot decide now (database or Apple's keys unreachable): answer 503 so Apple retries.
    case unavailable(String)
}

/// Verify, route, record: the whole path of one notification's token, short
/// of HTTP (the body, its size cap and its parsing are the HTTP layer's).
public struct NotificationReceiver: Sendable {
    let verifier: NotificationVerifier
    let router: EventRouter
    let clients: AppleClients
    let inbox: InboxWriter
    let rejections: RejectionWriter
    let metrics: NotificationMetrics
    let logger: Logger

    /// - Parameter clients: whom a notification may be for (the verifier's
    ///   audiences), each client's team.
    public init(verifier: NotificationVerifier, router: EventRouter, clients: AppleClients, inbox: InboxWriter,
                rejections: RejectionWriter, metrics: any MetricsFactory, logger: Logger) {
        self.verifier = verifier
        self.router = router
        self.clients = clients
        self.inbox = inbox
        self.rejections = rejections
        self.metrics = NotificationMetrics(factory: metrics)
        self.logger = logger
    }

    /// - Parameters:
    ///   - token: the JWS from the body's `payload`.
    ///   - body: the whole body, hashed into the rejection record if refused.
    public func receive(token: String, body: Data) async -> ReceiveResult {
        let notification: AppleNotification
        do {
            notification = try await withSpan("siwa.notification.verify") { span in
                RequestLogContext.tag(span)
                return try await verifier.verify(token)
            }
        } catch let failure as VerificationFailure {
            return reject(.token(failure), body: body)
        } catch {
            logger.warning("Cannot verify a notification now", metadata: ["error": "\(error)"])
            count(outcome: "unavailable", type: "none")
            return .unavailable("Apple's signing keys are unavailable")
        }

        // The verifier accepts only the clients' audiences: a team is there.
        guard let team = clients.team(of: notification.audience) else {
            return reject(.token(.wrongAudience), body: body)
        }
        let type = Self.metricType(notification.event.type)
        do {
            let outcome = try await withSpan("siwa.notification.record") { span in
                RequestLogContext.tag(span)
                span.attributes["siwa.notification.type"] = type
                return try await inbox.record(router.entry(for: notification, team: team))
            }
            let label = outcome == .duplicate ? "duplicate" : "recorded"
            count(outcome: label, type: type)
            logger.info("Notification \(label)", metadata: ["jti": "\(notification.jti)", "type": "\(type)"])
            return .accepted(outcome, eventType: notification.event.type, team: team, clientID: notification.audience)
        } catch {
            count(outcome: "unavailable", type: type)
            let why = (error as? InboxUnavailable)?.reason ?? "database error"
            logger.warning("Cannot record a notification now", metadata: ["jti": "\(notification.jti)", "reason": "\(why)"])
            return .unavailable("the notification could not be recorded now (\(why))")
        }
    }

    /// Refuse a delivery: counted, logged (the reason only) and queued for
    /// `siwa.rejected_notifications`; never waits for the database.
    /// - Parameters:
    ///   - body: what was read of the body (the hash covers it).
    ///   - announcedBytes: the Content-Length of a body refused unread.
    @discardableResult
    public func reject(_ rejection: Rejection, body: Data, announcedBytes: Int64? = nil) -> ReceiveResult {
        count(outcome: "rejected", type: "none")
        // Logged as stored: past SIWA_REJECTIONS_PER_MINUTE a flood of junk
        // is only counted, in the log as in the table.
        if rejections.record(reason: rejection.reason, detail: rejection.detail, body: body, byteCount: announcedBytes) {
            logger.notice("Notification rejected", metadata: ["reason": "\(rejection.reason)"])
        }
        return .rejected(rejection)
    }

    /// Refusals are arriving faster than SIWA_REJECTIONS_PER_MINUTE allows
    /// (a flood of junk): the HTTP layer holds its refusals a while.
    public var isFlooded: Bool { rejections.isFlooded }

    private func count(outcome: String, type: String) {
        metrics.count(outcome: outcome, type: type)
    }

    /// Event types as a metric label: the known ones, else "other" (a
    /// label must not take arbitrary values from the outside).
    static func metricType(_ type: String) -> String {
        AppleEventType(rawValue: type)?.rawValue ?? "other"
    }
}
