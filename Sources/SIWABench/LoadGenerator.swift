import AppleSimulator
import AsyncHTTPClient
import Foundation
import NIOCore
import Synchronization

/// Sends pre-signed notifications to siwa over real HTTP and times each
/// answer. Closed loop (N senders back to back) measures throughput; open
/// loop (a fixed offered rate) measures latency the way Apple experiences it.
struct LoadGenerator: Sendable {
    let url: String
    let client: HTTPClient

    struct Result {
        var completed: Int
        var failed: Int
        var seconds: Double
        var latencies: [Double]  // milliseconds
        var rate: Double { Double(completed) / seconds }
        func percentile(_ p: Double) -> Double {
            guard !latencies.isEmpty else { return .nan }
            let sorted = latencies.sorted()
            return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))]
        }
    }

    func post(_ body: Data) async -> Bool {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))
        guard let response = try? await client.execute(request, timeout: .seconds(30)) else { return false }
        _ = try? await response.body.collect(upTo: 64 * 1024)
        return response.status == .ok
    }

    /// `concurrency` senders, each posting the next body as soon as its last answer came.
    func closedLoop(bodies: [Data], concurrency: Int) async -> Result {
        let next = Ticket()
        let start = ContinuousClock.now
        let samples = await withTaskGroup(of: ([Double], Int).self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var latencies: [Double] = []
                    var failed = 0
                    while true {
                        let i = next.take()
                        guard i < bodies.count else { break }
                        let sent = ContinuousClock.now
                        if await post(bodies[i]) { latencies.append((ContinuousClock.now - sent).milliseconds) } else { failed += 1 }
                    }
                    return (latencies, failed)
                }
            }
            return await group.reduce(into: ([Double](), 0)) { $0.0 += $1.0; $0.1 += $1.1 }
        }
        let seconds = (ContinuousClock.now - start).milliseconds / 1000
        return Result(completed: samples.0.count, failed: samples.1, seconds: seconds, latencies: samples.0)
    }

    /// Offer `rate` notifications per second; latency counts from the
    /// scheduled send time, so queueing in the generator is not hidden.
    func openLoop(bodies: [Data], rate: Double) async -> Result {
        let start = ContinuousClock.now
        let interval = Duration.nanoseconds(Int64(1e9 / rate))
        let samples = await withTaskGroup(of: Double?.self) { group in
            for (i, body) in bodies.enumerated() {
                let scheduled = start + interval * i
                try? await Task.sleep(until: scheduled, clock: .continuous)
                group.addTask {
                    await post(body) ? (ContinuousClock.now - scheduled).milliseconds : nil
                }
            }
            return await group.reduce(into: [Double?]()) { $0.append($1) }
        }
        let seconds = (ContinuousClock.now - start).milliseconds / 1000
        let ok = samples.compactMap { $0 }
        return Result(completed: ok.count, failed: samples.count - ok.count, seconds: seconds, latencies: ok)
    }
}

extension Duration {
    var milliseconds: Double { Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15 }
}

/// Hands out 0, 1, 2, … to concurrent senders.
final class Ticket: Sendable {
    private let next = Mutex(0)
    func take() -> Int { next.withLock { n in defer { n += 1 }; return n } }
}
