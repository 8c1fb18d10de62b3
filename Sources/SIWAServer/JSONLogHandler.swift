import Foundation
import Logging
import Synchronization

/// One JSON object per line on stderr, for journald and log shippers.
/// Callers never put tokens, emails or names in messages or metadata.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let label: String
    private static let output = Mutex(())

    public init(label: String) { self.label = label }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let (level, message, explicit) = (event.level, event.message, event.metadata)
        var object: [String: Any] = [
            "ts": ISO8601DateFormatter.string(from: Date(), timeZone: .gmt, formatOptions: [.withInternetDateTime, .withFractionalSeconds]),
            "level": level.rawValue,
            "logger": label,
            "msg": message.description,
        ]
        for (key, value) in metadata.merging(explicit ?? [:], uniquingKeysWith: { $1 }) {
            object[key] = Self.plain(value)
        }
        guard var data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        data.append(0x0A)
        Self.output.withLock { _ in FileHandle.standardError.write(data) }
    }

    static func plain(_ value: Logger.MetadataValue) -> Any {
        switch value {
        case .string(let text): text
        case .stringConvertible(let convertible): convertible.description
        case .array(let values): values.map(plain)
        case .dictionary(let values): values.mapValues(plain)
        }
    }
}

public enum LoggingSetup {
    /// Once per process, before anything logs.
    public static func bootstrap(_ settings: LogSettings) {
        let level = Logger.Level(rawValue: settings.level) ?? .info
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler = switch settings.format {
            case .json: JSONLogHandler(label: label)
            case .text: StreamLogHandler.standardError(label: label)
            }
            handler.logLevel = level
            return handler
        }
    }
}
