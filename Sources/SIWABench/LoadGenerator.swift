import AppleSimulator
import AsyncHTTPClient
import Foundation
import NIOCore

/// Sends pre-signed notifications to siwa over real HTTP at a fixed offered
/// rate and times each answer: latency the way Apple experiences it.
/// (Throughput is measured with wrk; see Wrk.swift.)
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
    var milliseconds: Double { self / .milliseconds(1) }
}
