import AppleSignIn
import AppleSimulator
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// What siwa's CPU per notification is held against, measured in the same
/// run: the stack's own cost for a request that does nothing, and the
/// verification siwa cannot skip. Two bare routes that read the body and
/// answer 200: one on Hummingbird (siwa's HTTP stack), one on SwiftNIO's
/// HTTP/1 handlers alone (what leaving Hummingbird could save at most).
struct StackFloors: Sendable {
    let hummingbirdURL: String
    let nioURL: String
    let clientID: String
    let verifier: NotificationVerifier
    private let hummingbird: RunningServer
    private let nio: any Channel

    static func start(jwks: Data, clientID: String, logger: Logger) async throws -> StackFloors {
        let router = Router(context: BasicRequestContext.self)
        router.post("/apple/notifications") { request, _ -> Response in
            _ = try await request.body.collect(upTo: 64 * 1024)
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: #"{"status":"recorded"}"#)))
        }
        let hummingbird = try await RunningServer.start(router: router, port: 0, logger: logger)
        let nio = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(BareNIORoute())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let port = nio.localAddress?.port ?? 0
        let keys = try AppleKeySet(jwks: jwks, logger: logger)
        return StackFloors(hummingbirdURL: hummingbird.baseURL + "/apple/notifications",
                           nioURL: "http://127.0.0.1:\(port)/apple/notifications", clientID: clientID,
                           verifier: NotificationVerifier(keys: keys, policy: VerificationPolicy(audiences: [clientID])),
                           hummingbird: hummingbird, nio: nio)
    }

    func stop() async {
        await hummingbird.stop()
        try? await nio.close()
    }

    /// This process's CPU (µs) per notification to verify `bodies` one after
    /// another, as siwa does before it records one: the token's parse, its
    /// claims and the RSA signature. Alone on a quiet process: a floor.
    func verificationCPU(_ bodies: [Data]) async throws -> Double {
        let tokens = try bodies.map(IngestBodies.token(of:))
        _ = try await verifier.verify(tokens[0])  // the keys are loaded
        let before = processCPUSeconds(getpid())
        for token in tokens { _ = try await verifier.verify(token) }
        return (processCPUSeconds(getpid()) - before) / Double(tokens.count) * 1e6
    }

}

/// A route on SwiftNIO's HTTP/1 handlers alone: reads the request, answers
/// 200 with a fixed body, on the connection's own event loop; any other
/// path is a 404, as on a router (wrk's idle requests count on it). Its
/// clients (wrk, the open loop) keep their connections open.
private final class BareNIORoute: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    private static let answer = ByteBuffer(string: #"{"status":"recorded"}"#)
    private var status = HTTPResponseStatus.ok

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): status = head.method == .POST && head.uri == "/apple/notifications" ? .ok : .notFound
        case .body: break
        case .end:
            var headers = HTTPHeaders()
            headers.add(name: "content-type", value: "application/json")
            let body = status == .ok ? Self.answer : ByteBuffer()
            headers.add(name: "content-length", value: String(body.readableBytes))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
