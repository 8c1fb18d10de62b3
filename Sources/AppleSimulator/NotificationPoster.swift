import Foundation
import NIOCore
import NIOPosix

/// POSTs a server-to-server notification the way Apple does, over plain
/// HTTP/1.1 (the simulator only ever talks to loopback). Written on NIO
/// directly: the simulator has no HTTP client dependency of its own.
enum NotificationPoster {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The answer's status code; throws when there is none within `timeout`.
    static func post(_ body: Data, to url: URL, timeout: Duration = .seconds(10)) async throws -> Int {
        guard url.scheme == "http", let host = url.host else { throw Failure(description: "\(url) is not an http:// URL") }
        let port = url.port ?? 80
        let path = url.path.isEmpty ? "/" : url.path + (url.query.map { "?" + $0 } ?? "")
        return try await withThrowingTaskGroup(of: Int?.self) { group in
            group.addTask { try await exchange(body, host: host, port: port, path: path) }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let status = first else {
                throw Failure(description: "no answer from \(url) within \(timeout)")
            }
            return status
        }
    }

    private static func exchange(_ body: Data, host: String, port: Int, path: String) async throws -> Int {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var request = ByteBuffer(string: "POST \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n")
            request.writeBytes(body)
            try await outbound.write(request)
            // Only the status line matters: "HTTP/1.1 200 OK".
            var received = ""
            for try await chunk in inbound {
                received += String(buffer: chunk)
                if received.contains("\r\n") || received.utf8.count > 8192 { break }
            }
            let statusLine = received.split(separator: "\r\n", maxSplits: 1).first ?? ""
            let parts = statusLine.split(separator: " ")
            guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
                throw Failure(description: "no HTTP answer from \(host):\(port)")
            }
            return status
        }
    }
}
