import Foundation

/// A chart as the page's template draws it (`AdminTemplates.chart`): marks
/// in SVG user units, numbers already written as text, every text escaped
/// by the template engine.
public struct Chart: Sendable {
    public struct Bar: Sendable { public let x, y, width, height, color, title: String }
    public struct Line: Sendable { public let d, color, title: String; public let dashed: Bool }
    public struct Label: Sendable { public let x, y, text, anchor: String }
    public struct Rule: Sendable { public let y: String }
    /// A marker on a line: each day's value, with its number as a tooltip.
    public struct Point: Sendable { public let x, y, color, title: String }
    /// `swatch`: the stylesheet's class of the color (no inline style: the
    /// Content-Security-Policy allows none).
    public struct Key: Sendable { public let swatch, name: String }

    public let title: String
    public let width = AdminCharts.width
    public let height = AdminCharts.height
    /// Where the grid rules run, and the middle, for the template.
    public let plotStart = AdminCharts.number(AdminCharts.left)
    public let plotEnd = AdminCharts.number(Double(AdminCharts.width) - AdminCharts.right)
    public let middleX = AdminCharts.number(AdminCharts.left + AdminCharts.plotWidth / 2)
    public let middleY = AdminCharts.number(AdminCharts.top + AdminCharts.plotHeight / 2)
    public internal(set) var bars: [Bar] = []
    public internal(set) var lines: [Line] = []
    public internal(set) var labels: [Label] = []
    public internal(set) var rules: [Rule] = []
    public internal(set) var points: [Point] = []
    public internal(set) var legend: [Key] = []
    /// False: nothing to draw, the template says so instead. (Stored: the
    /// template engine reads stored properties only.)
    public internal(set) var hasData = false
}

/// The page's charts, drawn by siwa: pure functions from rows to `Chart`,
/// and `svg` to its text. No script, no external file.
public enum AdminCharts {
    /// Small user units, so that the text (14) stays readable when three
    /// charts share a laptop's width or one fills a phone's.
    public static let width = 480, height = 240
    public static let left = 44.0, right = 6.0, top = 10.0, bottom = 26.0
    public static let palette = ["#2563eb", "#f59e0b", "#10b981", "#db2777", "#8b5cf6", "#0891b2", "#65a30d", "#6b7280"]
    /// More series than colors: the smallest are summed as "other".
    public static let maxSeries = palette.count

    public static var plotWidth: Double { Double(width) - left - right }
    public static var plotHeight: Double { Double(height) - top - bottom }

    /// One bar per day (oldest first), a segment per series, bottom up in
    /// the order of the legend (largest total first).
    public static func stackedBars(title: String, days: [String], series: [String: [Int]]) -> Chart {
        var chart = Chart(title: title)
        let named = mergeSmallest(series.filter { $0.value.contains { $0 > 0 } })
        let totals = days.indices.map { day in named.reduce(0) { $0 + ($1.values.indices.contains(day) ? $1.values[day] : 0) } }
        let scale = niceMaximum(Double(totals.max() ?? 0))
        axes(&chart, days: days, maximum: scale, unit: "")
        guard !named.isEmpty else { return chart }
        chart.hasData = true
        let slot = plotWidth / Double(max(days.count, 1))
        let barWidth = max(1, slot * 0.75)
        for (index, item) in named.enumerated() {
            chart.legend.append(.init(swatch: "c\(index % palette.count)", name: item.name))
        }
        for day in days.indices {
            var base = 0.0
            for (index, item) in named.enumerated() {
                let value = item.values.indices.contains(day) ? item.values[day] : 0
                guard value > 0 else { continue }
                let height = Double(value) / scale * plotHeight
                let y = top + plotHeight - (base + Double(value)) / scale * plotHeight
                chart.bars.append(.init(x: number(left + slot * Double(day) + (slot - barWidth) / 2), y: number(y),
                                        width: number(barWidth), height: number(height),
                                        color: palette[index % palette.count], title: "\(days[day]) \(item.name): \(value)"))
                base += Double(value)
            }
        }
        return chart
    }

    /// p50 and p95 purge latency per day, in hours (nil: no purge completed
    /// that day, a gap in the line), against the SLA as a dashed line.
    public static func latency(title: String, days: [String], p50: [Double?], p95: [Double?], slaHours: Double) -> Chart {
        var chart = Chart(title: title)
        let highest = (p50 + p95).compactMap { $0 }.max() ?? 0
        let scale = niceMaximum(max(highest, slaHours) * 1.05)
        axes(&chart, days: days, maximum: scale, unit: "h")
        let slot = plotWidth / Double(max(days.count, 1))
        func y(_ hours: Double) -> Double { top + plotHeight - hours / scale * plotHeight }
        let slaY = number(y(slaHours))
        chart.lines.append(.init(d: "M\(number(left)) \(slaY)H\(number(left + plotWidth))", color: "#dc2626",
                                 title: "SLA: \(number(slaHours)) h", dashed: true))
        chart.legend.append(.init(swatch: "sla", name: "SLA \(number(slaHours)) h"))
        for (index, name, values) in [(0, "p50", p50), (1, "p95", p95)] {
            var path = "", pen = false
            for day in days.indices {
                guard values.indices.contains(day), let hours = values[day] else { pen = false; continue }
                let x = number(left + slot * (Double(day) + 0.5)), yText = number(y(hours))
                path += (pen ? "L" : "M") + "\(x) \(yText)"
                pen = true
                chart.points.append(.init(x: x, y: yText, color: palette[index], title: "\(days[day]) \(name): \(number(hours)) h"))
            }
            guard !path.isEmpty else { continue }
            chart.hasData = true
            chart.lines.append(.init(d: path, color: palette[index], title: "purge latency \(name)", dashed: false))
            chart.legend.append(.init(swatch: "c\(index)", name: name))
        }
        return chart
    }

    /// Grid rules at round values (`steps(for:)`), their values, and day
    /// labels (at most about six, evenly spaced).
    private static func axes(_ chart: inout Chart, days: [String], maximum: Double, unit: String) {
        let steps = steps(for: maximum)
        for step in 0...steps {
            let value = maximum * Double(step) / Double(steps)
            let y = number(top + plotHeight - plotHeight * Double(step) / Double(steps))
            chart.rules.append(.init(y: y))
            chart.labels.append(.init(x: number(left - 4), y: y, text: number(value) + unit, anchor: "end"))
        }
        let every = max(1, Int((Double(days.count) / 6).rounded(.up)))
        let slot = plotWidth / Double(max(days.count, 1))
        for (index, day) in days.enumerated() where index % every == 0 {
            chart.labels.append(.init(x: number(left + slot * (Double(index) + 0.5)), y: number(Double(height) - 8),
                                      text: String(day.suffix(5)), anchor: "middle"))
        }
    }

    /// The series, largest total first, at most `maxSeries` (the rest summed as "other").
    public static func mergeSmallest(_ series: [String: [Int]]) -> [(name: String, values: [Int])] {
        let sorted = series.map { (name: $0.key, values: $0.value) }
            .sorted { ($0.values.reduce(0, +), $1.name) > ($1.values.reduce(0, +), $0.name) }
        guard sorted.count > maxSeries else { return sorted }
        let rest = sorted[(maxSeries - 1)...]
        let length = rest.map(\.values.count).max() ?? 0
        let other = (0..<length).map { day in rest.reduce(0) { $0 + ($1.values.indices.contains(day) ? $1.values[day] : 0) } }
        return Array(sorted.prefix(maxSeries - 1)) + [(name: "other", values: other)]
    }

    /// How many grid steps divide a `niceMaximum` into round values: 5 for
    /// 1 or 5 (by 0.2 or 1), 4 for 2 (by 0.5), times a power of ten.
    public static func steps(for maximum: Double) -> Int {
        let leading = (maximum / pow(10, log10(maximum).rounded(.down))).rounded()
        return leading == 2 ? 4 : 5
    }

    /// The smallest 1, 2 or 5 times a power of ten at or above `value` (1 for 0).
    public static func niceMaximum(_ value: Double) -> Double {
        guard value > 0, value.isFinite else { return 1 }
        let power = pow(10, (log10(value)).rounded(.down))
        return [1.0, 2, 5, 10].map { $0 * power }.first { $0 >= value - 1e-9 } ?? 10 * power
    }

    /// At most one decimal, none when whole.
    public static func number(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(format: "%.1f", rounded)
    }

    /// The chart's SVG, as the page includes it.
    public static func svg(_ chart: Chart) -> String {
        AdminTemplates.library.render(chart, withTemplate: "chart") ?? ""
    }
}
