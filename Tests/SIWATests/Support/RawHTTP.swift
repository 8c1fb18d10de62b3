import Foundation
import NIOCore
import NIOPosix

/// HTTP/1.1 over a bare TCP connection, to watch what the server does with
/// the connection itself (closes it, keeps it, when). Non-blocking (NIO), so
/// a test waiting on a socket never holds a cooperative thread the
/// in-process server needs.
struct RawConnection: Sendable {
    enum End: Equatable, Sendable {
        /// The server closed the connection (EOF, or a reset).
        case closed
        /// Still open when we stopped waiting.
        case stillOpen
    }

    struct Reading: Sendable {
        let bytes: Data
        let end: End
        /// From the start of the read to the close (or to the give-up).
        let elapsed: Duration

        var text: String { String(decoding: bytes, as: UTF8.self) }
        /// The first answer's status code.
        var status: Int? {
            guard let line = text.components(separatedBy: "\r\n").first else { return nil }
            let parts = line.split(separator: " ")
            return parts.count >= 2 ? Int(parts[1]) : nil
        }
        /// The first answer's header `name` (case-insensitive), if present.
        func header(_ name: String) -> String? {
            guard let head = text.components(separatedBy: "\r\n\r\n").first else { return nil }
            for line in head.components(separatedBy: "\r\n").dropFirst() {
                let pair = line.split(separator: ":", maxSplits: 1)
                if pair.count == 2, pair[0].lowercased() == name.lowercased() {
                    return pair[1].trimmingCharacters(in: .whitespaces)
                }
            }
            return nil
        }
        /// How many answers (status lines) arrived.
        var answerCount: Int { text.components(separatedBy: "HTTP/1.1 ").count - 1 }
    }

    let inbound: NIOAsyncChannelInboundStream<ByteBuffer>
    let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    let channel: any Channel

    /// Connects to 127.0.0.1:`port`, runs `body`, closes.
    static func with<T: Sendable>(port: Int, _ body: (RawConnection) async throws -> T) async throws -> T {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let result = Locked<T?>(nil)
        do {
            try await channel.executeThenClose { inbound, outbound in
                let value = try await body(RawConnection(inbound: inbound, outbound: outbound, channel: channel.channel))
                result.withLock { $0 = value }
            }
        } catch {
            // The server may reset the connection it closed (what these tests
            // watch for); closing our end then reports the reset. Once the
            // body has its answer, that is not a failure of the test.
            guard let value = result.withLock({ $0 }) else { throw error }
            return value
        }
        guard let value = result.withLock({ $0 }) else { throw TestSetupError("the connection's body returned nothing") }
        return value
    }

    /// Sends `bytes`; a write to a connection the server closed is not an error here.
    func send(_ bytes: Data) async {
        try? await outbound.write(ByteBuffer(bytes: bytes))
    }

    func send(_ text: String) async { await send(Data(text.utf8)) }

    /// Reads until the server closes the connection or `limit` passes.
    func readUntilClosed(limit: Duration) async -> Reading {
        let start = ContinuousClock.now
        let (inbound, channel) = (self.inbound, self.channel)
        let collected = await withTaskGroup(of: (Data, End)?.self) { group in
            group.addTask {
                var bytes = Data()
                do {
                    for try await chunk in inbound { bytes.append(contentsOf: chunk.readableBytesView) }
                } catch {
                    // A reset counts as closed, like EOF.
                }
                return (bytes, .closed)
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            if let first = await group.next() ?? nil {
                group.cancelAll()
                return first
            }
            // Gave up: close our side, which ends the reader, and keep what it read.
            try? await channel.close()
            let read = await group.next() ?? nil
            return (read?.0 ?? Data(), End.stillOpen)
        }
        return Reading(bytes: collected.0, end: collected.1, elapsed: ContinuousClock.now - start)
    }
}
