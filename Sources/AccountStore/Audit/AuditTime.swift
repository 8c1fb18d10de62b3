import Foundation

/// A point in time as an admin types it (`siwa audit --since`, the admin
/// routes' `since=`): ISO 8601, in UTC unless it carries an offset, or a
/// span before now.
public enum AuditTime {
    /// What `parse` accepts, for help texts and refusals.
    public static let accepted = "an ISO 8601 time, UTC unless an offset is given (2026-05-01, 2026-05-01T12:00:00Z, "
        + "2026-05-01T14:00:00+02:00), or a span before now (90m, 24h, 7d)"

    /// nil: not a time of either form (or a date that does not exist).
    public static func parse(_ text: String, now: Date = Date()) -> Date? {
        if let match = text.wholeMatch(of: /([0-9]{1,6})([mhd])/), let count = Double(match.1) {
            let unit: Double = switch match.2 { case "m": 60; case "h": 3600; default: 86400 }
            return now.addingTimeInterval(-count * unit)
        }
        guard let match = text.wholeMatch(
            of: /([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,9}))?)?)?(Z|[+-][0-9]{2}:?[0-9]{2})?/
        ) else { return nil }
        var components = DateComponents()
        components.year = Int(match.1)
        components.month = Int(match.2)
        components.day = Int(match.3)
        components.hour = match.4.flatMap { Int($0) } ?? 0
        components.minute = match.5.flatMap { Int($0) } ?? 0
        components.second = match.6.flatMap { Int($0) } ?? 0
        var offset = 0
        if let zone = match.8 {
            guard let seconds = offsetSeconds(String(zone)) else { return nil }
            offset = seconds
        }
        var calendar = Calendar(identifier: .gregorian)
        guard let utc = TimeZone(identifier: "UTC") else { return nil }
        calendar.timeZone = utc
        // The calendar rolls 2026-02-30 over to March: refuse what it changed.
        guard let date = calendar.date(from: components) else { return nil }
        let back = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        guard [back.year, back.month, back.day, back.hour, back.minute, back.second]
                == [components.year, components.month, components.day, components.hour, components.minute, components.second]
        else { return nil }
        let fraction = match.7.map { Double("0." + $0) ?? 0 } ?? 0
        return date.addingTimeInterval(fraction - Double(offset))
    }

    /// `Z`, `+02:00`, `-0530` as seconds east of UTC; nil if out of range.
    private static func offsetSeconds(_ text: String) -> Int? {
        if text == "Z" { return 0 }
        let digits = text.dropFirst().filter(\.isNumber)
        guard let hours = Int(digits.prefix(2)), let minutes = Int(digits.suffix(2)), hours <= 14, minutes < 60 else { return nil }
        return (text.hasPrefix("-") ? -1 : 1) * (hours * 3600 + minutes * 60)
    }
}
