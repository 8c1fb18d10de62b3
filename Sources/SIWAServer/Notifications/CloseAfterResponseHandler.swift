import Foundation
import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Makes `Connection: close` on an answer mean it: once such an answer is
/// written, the connection serves nothing more and is closed.
///
/// Hummingbird closes a connection only when the *request* asked for it;
/// after any other answer it reads the rest of the request body (however
/// large or slow) and waits for the next request. siwa's own routes answer
/// a 413, or a 4xx given before the body was read whole, with
/// `Connection: close`; this handler adds it to any other 4xx written while
/// the request's body has not all arrived (a 404 or 405 to a large POST, an
/// answer of Hummingbird's own). After such an answer it drops whatever the
/// client still sends, shuts the output down right after the answer (the
/// client reads the answer, then EOF), and closes the connection fully when
/// the client closes its side or after `linger`, whichever comes first. The linger, instead of an immediate
/// close, keeps the kernel from answering unread body bytes with a reset
/// that could destroy the answer before the client has read it.
final class CloseAfterResponseHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    static let linger: TimeAmount = .seconds(2)

    /// The answer being written carries `Connection: close`.
    private var closeAfterThisResponse = false
    /// Requests whose end has arrived, and final answers begun: answer n
    /// (from 0) is to request n, whose body has not all arrived while
    /// `requestsEnded <= n` (pipelined requests keep their order).
    private var requestsEnded = 0
    private var answersStarted = 0
    /// That answer has been written: drop all input, close soon.
    private var closing = false

    init() {}

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Not a byte more for the application: no further request is served.
        guard !closing else { return }
        if case .end = unwrapInboundIn(data) { requestsEnded += 1 }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if closing, let event = event as? ChannelEvent, event == .inputClosed {
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var response):
            guard response.status.kind != .informational else {
                context.write(data, promise: promise)
                return
            }
            let bodyPending = requestsEnded <= answersStarted
            answersStarted += 1
            closeAfterThisResponse = Self.asksToClose(response.headerFields)
            if !closeAfterThisResponse, bodyPending, response.status.kind == .clientError {
                closeAfterThisResponse = true
                response.headerFields[.connection] = "close"
                context.write(wrapOutboundOut(.head(response)), promise: promise)
            } else {
                context.write(data, promise: promise)
            }
        case .body:
            context.write(data, promise: promise)
        case .end:
            guard closeAfterThisResponse, !closing else {
                context.write(data, promise: promise)
                return
            }
            closing = true
            let written = context.eventLoop.makePromise(of: Void.self)
            if let promise { written.futureResult.cascade(to: promise) }
            context.writeAndFlush(data, promise: written)
            let channel = context.channel
            written.futureResult.whenComplete { _ in
                channel.close(mode: .output, promise: nil)
                channel.eventLoop.scheduleTask(in: Self.linger) { channel.close(promise: nil) }
            }
        }
    }

    /// `Connection` lists the `close` option (RFC 9110 §7.6.1).
    static func asksToClose(_ fields: HTTPFields) -> Bool {
        fields[values: .connection].contains { value in
            value.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "close" }
        }
    }
}
