import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Synchronization

/// A downstream service that receives siwa's purge webhooks, for tests and
/// the demo. It checks each request's Standard Webhooks signature with its
/// own code (not siwa's), records what it saw, and can be told to fail.
public final class DownstreamStub: Sendable {
    public struct Delivery: Sendable {
        public let webhookID: String
        public let timestamp: Int
        public let body: Data
        /// The signature matched the shared secret.
        public let signatureValid: Bool
        /// Answered 2xx (counted as done by the sender).
        public let accepted: Bool
        public let receivedAt: Date

        /// The JSON body's fields.
        public var fields: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
    }

    public enum Behaviour: Sendable {
        case succeed
        /// Answer 500 to the first `count` deliveries of each webhook id.
        case failFirst(Int)
        case alwaysFail
        /// For the first `count` deliveries of each webhook id: answer 200,
        /// send the headers and the first bytes of the body, then stall (a
        /// downstream that hangs mid-answer). Later deliveries succeed.
        case stallAfterHeaders(first: Int)
    }

    private struct State {
        var deliveries: [Delivery] = []
        var behaviour: Behaviour = .succeed
        var delay: Duration = .zero
    }

    /// The secret, as the purge plan's `secret_env` variable holds it.
    public let secret: String
    private let key: SymmetricKey
    private let state = Mutex(State())

    public init() {
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
        secret = "whsec_" + Data(bytes).base64EncodedString()
        key = SymmetricKey(data: bytes)
    }

    public var deliveries: [Delivery] { state.withLock { $0.deliveries } }

    public func set(_ behaviour: Behaviour) { state.withLock { $0.behaviour = behaviour } }

    /// Wait this long before answering (a slow downstream).
    public func set(delay: Duration) { state.withLock { $0.delay = delay } }

    /// Serve on `127.0.0.1:port` (0 picks a free port) until the server is stopped.
    public func start(port: Int = 0, logger: Logger = Logger(label: "downstream-stub")) async throws -> RunningServer {
        let router = Router(context: BasicRequestContext.self)
        router.post("/hooks/purge") { request, _ -> Response in
            let body = Data(buffer: try await request.body.collect(upTo: 64 * 1024))
            let id = request.headers[HTTPField.Name("webhook-id")!] ?? ""
            let timestamp = Int(request.headers[HTTPField.Name("webhook-timestamp")!] ?? "") ?? 0
            let signature = request.headers[HTTPField.Name("webhook-signature")!] ?? ""
            let valid = self.verify(id: id, timestamp: timestamp, body: body, header: signature)
            let (accept, stall, delay) = self.state.withLock { state -> (Bool, Bool, Duration) in
                let earlier = state.deliveries.filter { $0.webhookID == id }.count
                var accept: Bool
                var stall = false
                switch state.behaviour {
                case .succeed: accept = valid
                case .failFirst(let count): accept = valid && earlier >= count
                case .alwaysFail: accept = false
                case .stallAfterHeaders(let count):
                    stall = valid && earlier < count
                    accept = valid && !stall
                }
                state.deliveries.append(Delivery(webhookID: id, timestamp: timestamp, body: body, signatureValid: valid,
                                                 accepted: accept, receivedAt: Date()))
                return (accept, stall, state.delay)
            }
            if delay > .zero { try await Task.sleep(for: delay) }
            if stall {
                // The head and a first chunk go out; the rest never comes
                // (until the client gives up and closes, or a minute passes).
                return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody { writer in
                    try await writer.write(ByteBuffer(string: #"{"received":"#))
                    try await Task.sleep(for: .seconds(60))
                    try await writer.write(ByteBuffer(string: "true}"))
                    try await writer.finish(nil)
                })
            }
            return Response(status: accept ? .noContent : (valid ? .internalServerError : .unauthorized))
        }
        return try await RunningServer.start(router: router, port: port, logger: logger)
    }

    /// The receiving side of the spec: HMAC-SHA256 over "id.timestamp.body";
    /// the header may list several space-separated "v1,<base64>" signatures.
    func verify(id: String, timestamp: Int, body: Data, header: String) -> Bool {
        guard !id.isEmpty, abs(Date().timeIntervalSince1970 - Double(timestamp)) < 300 else { return false }
        var content = Data("\(id).\(timestamp).".utf8)
        content.append(body)
        let expected = Data(HMAC<SHA256>.authenticationCode(for: content, using: key))
        return header.split(separator: " ").contains { candidate in
            guard candidate.hasPrefix("v1,"), let given = Data(base64Encoded: String(candidate.dropFirst(3))) else { return false }
            return given.count == expected.count && zip(given, expected).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
        }
    }
}
