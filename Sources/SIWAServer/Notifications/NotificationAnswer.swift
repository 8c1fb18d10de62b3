import AccountLifecycle
import Hummingbird

/// What `POST /apple/notifications` answers for a token's result
/// (docs/http-api.md, "Apple's notifications"): 200 with what was done, 400 with why the token is
/// refused, 503 with `Retry-After: 5` so Apple retries. Written by hand (the
/// hot answer); public for AnswerBytesTests, which checks `json` against
/// `AnswerJSON`.
public struct NotificationAnswer: Sendable {
    public let status: HTTPResponse.Status
    public let body: Body

    public enum Body: Sendable, Equatable {
        case accepted(AcceptedNotification)
        case refused(ErrorAnswer)
    }

    public init(_ result: ReceiveResult) {
        switch result {
        case .accepted(let outcome, let type, let team, let clientID):
            let done = switch outcome {
            case .recorded: "recorded"
            case .duplicate: "duplicate"
            }
            (status, body) = (.ok, .accepted(AcceptedNotification(status: done, eventType: String(type.prefix(64)),
                                                                          team: team, clientID: clientID)))
        case .rejected(let rejection):
            (status, body) = (.badRequest, .refused(ErrorAnswer(rejection.reason, rejection.detail)))
        case .unavailable(let why):
            (status, body) = (.serviceUnavailable, .refused(ErrorAnswer("unavailable", "\(why); retry later")))
        }
    }

    public var json: String {
        switch body {
        case .accepted(let accepted): accepted.json
        case .refused(let error): error.json
        }
    }

    var response: Response {
        var response = JSONResponse.answer(status, ByteBuffer(string: json))
        if status == .serviceUnavailable { response.headers[.retryAfter] = "5" }
        return response
    }
}

/// `{"status": "recorded" | "duplicate", "event_type": "...", "team": "...",
/// "client_id": "..."}`, in that order (docs/http-api.md).
public struct AcceptedNotification: Encodable, Sendable, Equatable {
    public let status: String
    /// Apple's event type, at most 64 characters of it.
    public let eventType: String
    /// The team of the client the notification is for.
    public let team: String
    /// The notification's `aud`.
    public let clientID: String

    public var json: String {
        JSONResponse.ordered(["status": status, "event_type": eventType, "team": team, "client_id": clientID])
    }
}
