#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Every time siwa writes (answers, `--json`, tables, the admin page, log
/// lines): ISO 8601 in UTC, `2026-11-23T15:10:57.150Z`, or to the second
/// (`2026-11-23T15:10:57Z`) where an answer has always shown seconds (jobs,
/// API keys, the page). Written from `gmtime_r`, fractions truncated:
/// ISO8601DateFormatter builds an ICU formatter per instance and is not
/// Sendable, and the log line writes one of these per event.
public enum UTCTime {
    public enum Precision: Sendable { case seconds, milliseconds }

    public static func text(_ date: Date, _ precision: Precision = .milliseconds) -> String {
        var bytes: [UInt8] = []
        append(date, precision, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    public static func append(_ date: Date, _ precision: Precision = .milliseconds, to bytes: inout [UInt8]) {
        let since1970 = date.timeIntervalSince1970
        let whole = since1970.rounded(.down)
        let milliseconds = precision == .milliseconds ? min(999, Int((since1970 - whole) * 1000)) : nil
        append(seconds: Int(whole), milliseconds: milliseconds, to: &bytes)
    }

    /// Unix seconds (and milliseconds within the second, if any).
    public static func append(seconds: Int, milliseconds: Int?, to bytes: inout [UInt8]) {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
        digits(Int(parts.tm_year) + 1900, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2)
        bytes.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2)
        if let milliseconds {
            bytes.append(UInt8(ascii: "."))
            digits(milliseconds, 3)
        }
        bytes.append(UInt8(ascii: "Z"))
    }
}
