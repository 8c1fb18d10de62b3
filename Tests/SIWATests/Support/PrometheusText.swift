import Foundation

/// A scrape of Prometheus text, for the tests to read series out of:
/// `value("siwa_worker_jobs_completed_total", ["kind": "purge_user"])`.
struct PrometheusText {
    struct Sample {
        let name: String
        let labels: [String: String]
        let value: Double
    }

    let samples: [Sample]
    let text: String

    init(_ text: String) {
        self.text = text
        samples = text.split(separator: "\n").compactMap { line in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                return nil
            }
            let series = line[..<space]
            guard let brace = series.firstIndex(of: "{") else { return Sample(name: String(series), labels: [:], value: value) }
            var labels: [String: String] = [:]
            for match in series[brace...].matches(of: /([a-zA-Z_]+)="([^"]*)"/) {
                labels[String(match.output.1)] = String(match.output.2)
            }
            return Sample(name: String(series[..<brace]), labels: labels, value: value)
        }
    }

    /// The sample named so whose labels include `labels`; nil if none.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { sample in sample.name == name && labels.allSatisfy { key, value in sample.labels[key] == value } }?.value
    }

    var names: Set<String> { Set(samples.map(\.name)) }

    /// GET `url`'s /metrics.
    static func scrape(_ baseURL: String) async throws -> PrometheusText {
        let answer = try await HTTPAnswer.send(method: .GET, url: baseURL + "/metrics", body: nil, headers: [])
        guard answer.status == 200 else { throw TestSetupError("GET \(baseURL)/metrics answered \(answer.status)") }
        return PrometheusText(String(decoding: answer.body, as: UTF8.self))
    }
}
