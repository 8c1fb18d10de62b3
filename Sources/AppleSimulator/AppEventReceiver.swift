import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Synchronization

/// An app's backend receiving siwa's app events (SIWA_APP_WEBHOOK_URL), for
/// the tests and the bench. It records what arrived exactly as it arrived
/// (the headers' raw values and the body), checks nothing itself (the tests
/// verify the signatures with their own code), and answers as `rule` says.
public final class AppEventReceiver: Sendable {
    public static let path = "/siwa/events"

    public struct Delivery: Sendable {
        public let webhookID: String
        public let timestamp: String
        public let signature: String
        public let body: Data
        /// The W3C trace context siwa sent (its tracer on), else nil.
        public let traceparent: String?
        /// 1 for the first delivery of this webhook-id.
        public let attempt: Int
        /// What it was answered.
        public let status: Int

        /// The JSON body.
        public var envelope: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
        public var type: String { envelope["type"] as? String ?? "" }
        public var data: [String: Any] { envelope["data"] as? [String: Any] ?? [:] }
        public var sub: String { data["sub"] as? String ?? "" }
    }

    /// The status to answer a delivery with, given its webhook-id, body and attempt.
    public typealias Rule = @Sendable (_ id: String, _ body: Data, _ attempt: Int) -> Int

    private struct State {
        var deliveries: [Delivery] = []
        var attempts: [String: Int] = [:]
        var received = 0
        var rule: Rule = { _, _, _ in 204 }
    }

    /// false: count only (the bench), no body kept.
    public let recording: Bool
    private let state = Mutex(State())

    public init(recording: Bool = true) { self.recording = recording }

    public func answer(with rule: @escaping Rule) { state.withLock { $0.rule = rule } }

    public var deliveries: [Delivery] { state.withLock { $0.deliveries } }
    /// Every request, answered anything.
    public var received: Int { state.withLock { $0.received } }

    /// Serve on `127.0.0.1:port` (0 picks a free port) until the server is stopped.
    public func start(port: Int = 0, logger: Logger = Logger(label: "app-event-receiver")) async throws -> RunningServer {
        let router = Router(context: BasicRequestContext.self)
        router.post(RouterPath(stringLiteral: Self.path)) { request, _ -> Response in
            let body = Data(buffer: try await request.body.collect(upTo: 1024 * 1024))
            let id = request.headers[HTTPField.Name("webhook-id")!] ?? ""
            let timestamp = request.headers[HTTPField.Name("webhook-timestamp")!] ?? ""
            let signature = request.headers[HTTPField.Name("webhook-signature")!] ?? ""
            ContractRecorder.event(headers: ["webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": signature]
                                       .filter { !$0.value.isEmpty }, body: body)
            let traceparent = request.headers[HTTPField.Name("traceparent")!]
            let status = self.state.withLock { state -> Int in
                state.received += 1
                guard self.recording else { return state.rule(id, body, 1) }
                let attempt = state.attempts[id, default: 0] + 1
                state.attempts[id] = attempt
                let status = state.rule(id, body, attempt)
                state.deliveries.append(Delivery(webhookID: id, timestamp: timestamp, signature: signature, body: body,
                                                 traceparent: traceparent, attempt: attempt, status: status))
                return status
            }
            return Response(status: HTTPResponse.Status(code: status),
                            body: .init(byteBuffer: ByteBuffer(string: status < 300 ? "" : #"{"error":"try again"}"#)))
        }
        return try await RunningServer.start(router: router, port: port, logger: logger)
    }
}
