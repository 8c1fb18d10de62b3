#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AppleSignIn
import Logging
import Synchronization

/// One JSON object per line on stderr, for journald and log shippers:
/// `ts`, `level`, `logger`, `msg`, then the metadata in key order.
/// Callers never put tokens, emails or names in messages or metadata.
///
/// Written by hand because it runs once per notification: Foundation's
/// JSONSerialization and ISO8601DateFormatter (an ICU formatter per call)
/// cost more CPU than verifying the notification, and halved `make bench`.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let label: String
    let fileDescriptor: Int32
    /// Lines from concurrent tasks must not interleave on the way out.
    private static let output = Mutex(())
    private static let reservedKeys: Set<String> = ["ts", "level", "logger", "msg"]

    public init(label: String, fileDescriptor: Int32 = STDERR_FILENO) {
        self.label = label
        self.fileDescriptor = fileDescriptor
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line: [UInt8] = []
        line.reserveCapacity(256)
        line.append(contentsOf: #"{"ts":""#.utf8)
        Self.appendTimestamp(to: &line)
        line.append(contentsOf: #"","level":"#.utf8)
        JSONText.appendQuoted(event.level.rawValue, to: &line)
        line.append(contentsOf: #","logger":"#.utf8)
        JSONText.appendQuoted(label, to: &line)
        line.append(contentsOf: #","msg":"#.utf8)
        JSONText.appendQuoted(event.message.description, to: &line)
        let merged = event.metadata.map { metadata.merging($0) { $1 } } ?? metadata
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            line.append(UInt8(ascii: ","))
            // A metadata key never hides one of the four fields.
            JSONText.appendQuoted(Self.reservedKeys.contains(key) ? "meta." + key : key, to: &line)
            line.append(UInt8(ascii: ":"))
            Self.appendValue(value, to: &line)
        }
        line.append(contentsOf: "}\n".utf8)
        Self.output.withLock { _ in
            line.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = write(fileDescriptor, bytes.baseAddress! + offset, bytes.count - offset)
                    if written > 0 {
                        offset += written
                    } else if written < 0 && errno == EINTR {
                        continue
                    } else {
                        return  // nowhere to report a failed log write
                    }
                }
            }
        }
    }

    static func appendValue(_ value: Logger.MetadataValue, to line: inout [UInt8]) {
        switch value {
        case .string(let text):
            JSONText.appendQuoted(text, to: &line)
        case .stringConvertible(let convertible):
            JSONText.appendQuoted(convertible.description, to: &line)
        case .array(let values):
            line.append(UInt8(ascii: "["))
            for (index, element) in values.enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                appendValue(element, to: &line)
            }
            line.append(UInt8(ascii: "]"))
        case .dictionary(let values):
            line.append(UInt8(ascii: "{"))
            for (index, (key, element)) in values.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                JSONText.appendQuoted(key, to: &line)
                line.append(UInt8(ascii: ":"))
                appendValue(element, to: &line)
            }
            line.append(UInt8(ascii: "}"))
        }
    }

    /// Now in UTC as `2026-11-22T12:34:56.789Z`.
    static func appendTimestamp(to line: inout [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            while divisor > 0 {
                line.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
        digits(Int(parts.tm_year) + 1900, 4)
        line.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2)
        line.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2)
        line.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2)
        line.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2)
        line.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2)
        line.append(UInt8(ascii: "."))
        digits(Int(now.tv_nsec) / 1_000_000, 3)
        line.append(UInt8(ascii: "Z"))
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
