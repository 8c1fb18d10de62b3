import Foundation
import SIWAServer
import Testing

/// The admin page's charts: pure functions from rows to SVG, checked by
/// their geometry and by the SVG text they make.
@Suite("Admin charts")
struct AdminChartsTests {
    static let days = ["2026-11-01", "2026-11-02", "2026-11-03"]
    static let top = AdminCharts.top, height = AdminCharts.plotHeight

    @Test func stackedBarsStackEachDaysSeriesToItsTotal() throws {
        let chart = AdminCharts.stackedBars(title: "notifications", days: Self.days, series: [
            "email-disabled": [1, 0, 3], "consent-revoked": [2, 1, 0], "account-delete": [0, 0, 0],
        ])
        #expect(chart.hasData)
        // A segment per non-zero value; a series that is all zero is left out, legend included.
        #expect(chart.bars.count == 4)
        #expect(chart.legend.map(\.name) == ["email-disabled", "consent-revoked"], "largest total first")
        // Scale: the largest day (3) rounds up to 5; each day's segments add up to its total.
        for (day, total) in [(0, 3.0), (1, 1.0), (2, 3.0)] {
            let segments = chart.bars.filter { $0.title.hasPrefix(Self.days[day]) }
            let sum = segments.compactMap { Double($0.height) }.reduce(0, +)
            #expect(abs(sum - total / 5 * Self.height) < 0.2, "day \(day): \(segments)")
            let stackTop = segments.compactMap { Double($0.y) }.min() ?? 0
            #expect(abs(stackTop - (Self.top + Self.height - total / 5 * Self.height)) < 0.2)
        }
        #expect(chart.bars.contains { $0.title == "2026-11-03 email-disabled: 3" })
        // Day labels and the value axis (0 to 5 by 1).
        #expect(chart.labels.map(\.text).filter { $0.contains("-") } == ["11-01", "11-02", "11-03"])
        #expect(chart.labels.filter { $0.anchor == "end" }.map(\.text) == ["0", "1", "2", "3", "4", "5"])
    }

    @Test func theSVGHasTheMarksAndEscapesEveryText() throws {
        let chart = AdminCharts.stackedBars(title: "refusals \"<all>\"", days: Self.days, series: [
            "<script>alert(1)</script>": [1, 2, 3], "bad_signature": [4, 0, 0],
        ])
        let svg = AdminCharts.svg(chart)
        #expect(svg.hasPrefix("<svg viewBox=\"0 0 480 240\""), "\(svg.prefix(80))")
        #expect(svg.components(separatedBy: "<rect ").count - 1 == 4)
        #expect(svg.components(separatedBy: "<line ").count - 1 == 6, "grid rules at 0, 2, 4, 6, 8, 10")
        #expect(!svg.contains("<script>") && svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(svg.contains(#"aria-label="refusals &quot;&lt;all&gt;&quot;""#))
        #expect(!svg.contains("style="), "the Content-Security-Policy allows no inline style attribute")
        #expect(svg.contains(#"<span class="swatch c0"></span>bad_signature"#) == false)
        #expect(svg.contains(#"<span class="swatch c0"></span>&lt;script&gt;"#), "largest total first: \(svg)")
    }

    @Test func latencyDrawsP50AndP95WithGapsAgainstTheSLA() throws {
        let chart = AdminCharts.latency(title: "latency", days: Self.days, p50: [1, nil, 2], p95: [3, nil, 80], slaHours: 72)
        #expect(chart.hasData)
        // 80 h (above the SLA) sets the scale: 84 rounds up to 100.
        let sla = try #require(chart.lines.first { $0.dashed })
        let slaY = Self.top + Self.height * (1 - 72.0 / 100)
        #expect(sla.d == "M44 \(AdminCharts.number(slaY))H474", "\(sla.d)")
        let p50 = try #require(chart.lines.first { $0.title.hasSuffix("p50") })
        let p95 = try #require(chart.lines.first { $0.title.hasSuffix("p95") })
        // The day without a purge is a gap: two pieces, each starting with a move.
        #expect(p50.d.filter { $0 == "M" }.count == 2 && p95.d.filter { $0 == "M" }.count == 2, "\(p50.d)")
        #expect(p95.d.contains(" \(AdminCharts.number(Self.top + Self.height * (1 - 80.0 / 100)))"), "\(p95.d)")
        #expect(chart.legend.map(\.name) == ["SLA 72 h", "p50", "p95"])
        #expect(chart.points.map(\.title) == ["2026-11-01 p50: 1 h", "2026-11-03 p50: 2 h", "2026-11-01 p95: 3 h", "2026-11-03 p95: 80 h"])
        #expect(chart.labels.filter { $0.anchor == "end" }.map(\.text) == ["0h", "20h", "40h", "60h", "80h", "100h"])
        let svg = AdminCharts.svg(chart)
        #expect(svg.components(separatedBy: "<path ").count - 1 == 3)
        #expect(svg.components(separatedBy: "<circle ").count - 1 == 4)
        #expect(svg.contains(#"stroke-dasharray="6 4""#))
    }

    @Test func noDataSaysSo() {
        let bars = AdminCharts.stackedBars(title: "none", days: Self.days, series: ["email-enabled": [0, 0, 0]])
        let lines = AdminCharts.latency(title: "none", days: Self.days, p50: [nil, nil, nil], p95: [nil, nil, nil], slaHours: 72)
        #expect(!bars.hasData && bars.bars.isEmpty && !lines.hasData)
        #expect(AdminCharts.svg(bars).contains("no data in these days"))
        #expect(AdminCharts.svg(lines).contains("no data in these days"))
        #expect(AdminCharts.stackedBars(title: "none", days: [], series: [:]).bars.isEmpty)
    }

    @Test func manySeriesKeepTheLargestAndSumTheRestAsOther() {
        var series: [String: [Int]] = [:]
        for index in 1...10 { series["type\(index)"] = [index, 1] }
        let merged = AdminCharts.mergeSmallest(series)
        #expect(merged.count == AdminCharts.maxSeries)
        #expect(merged.first?.name == "type10" && merged.last?.name == "other")
        #expect(merged.last?.values == [1 + 2 + 3, 3], "the three smallest, day by day")
    }

    @Test(arguments: [(0.0, 1.0, 5), (0.3, 0.5, 5), (3, 5, 5), (10, 10, 5), (11, 20, 4), (84, 100, 5), (2_001, 5_000, 5)])
    func niceMaximumsAreOneTwoOrFiveTimesAPowerOfTenInRoundSteps(_ value: Double, _ expected: Double, _ steps: Int) {
        #expect(AdminCharts.niceMaximum(value) == expected)
        #expect(AdminCharts.steps(for: expected) == steps)
    }
}
