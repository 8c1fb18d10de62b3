#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import AccountLifecycle
import AccountStore
import AppleSignIn
import Foundation
import Logging
import Synchronization

/// One line per event on stderr, for journald and log shippers; callers
/// never put tokens, emails or names in messages or metadata.
///
/// - `json`: one object per line: `ts`, `level`, `logger`, `msg`, then the
///   metadata in key order.
/// - `text`: logfmt, `ts=2026-11-22T12:34:56.789Z level=info logger=siwa.serve
///   msg=Listening address=…`, the same four fields, then the metadata in key
///   order. A value with a space, `=`, `"` or a control character is quoted
///   and escaped, and a key is only letters, digits, `_`, `.` and `-`, so no
///   value can forge a key or another line.
///
/// Under systemd (`priorityPrefix`: stderr is the journal's stream) each line
/// starts with its syslog priority, `<3>` to `<7>` (sd-daemon(3)), which
/// journald strips and records, so `journalctl -p warning` works. Metadata
/// comes from the logger, then swift-log's metadata provider (the request
/// a line is about: `RequestLogContext`), then the call, later ones winning.
///
/// Written by hand because it runs once per notification: Foundation's
/// JSONSerialization and ISO8601DateFormatter (an ICU formatter per call)
/// cost more CPU than verifying the notification and halved `make bench`,
/// and JSONEncoder (`AnswerJSON`, the answers' encoder) would box each
/// metadata value in a Codable type and allocate per line;
/// swift-log's StreamLogHandler (strftime and a flush per line) cost a
/// fifth more CPU per notification than these lines.
public struct LogLineHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let format: LogSettings.Format
    let fileDescriptor: Int32
    let priorityPrefix: Bool
    /// Lines from concurrent tasks must not interleave on the way out.
    private static let output = Mutex(())
    private static let reservedKeys: Set<String> = ["ts", "level", "logger", "msg"]

    public init(label: String, format: LogSettings.Format, fileDescriptor: Int32 = STDERR_FILENO,
                priorityPrefix: Bool = false, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.format = format
        self.fileDescriptor = fileDescriptor
        self.priorityPrefix = priorityPrefix
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        // A handful of keys: collected into one array (a later source's key
        // replaces an earlier one's) rather than merged dictionaries, which
        // cost a hash table per source and per line.
        var fields: [(key: String, value: Logger.MetadataValue)] = []
        fields.reserveCapacity(metadata.count + 4)
        func add(_ source: Logger.Metadata) {
            for (key, value) in source {
                if let index = fields.firstIndex(where: { $0.key == key }) { fields[index].value = value } else { fields.append((key, value)) }
            }
        }
        add(metadata)
        if let provided = metadataProvider?.get() { add(provided) }
        if let explicit = event.metadata { add(explicit) }
        fields.sort { $0.key < $1.key }
        var line: [UInt8] = []
        line.reserveCapacity(256)
        if priorityPrefix { Self.appendPriority(event.level, to: &line) }
        switch format {
        case .json: jsonLine(event, fields, into: &line)
        case .text: textLine(event, fields, into: &line)
        }
        line.append(UInt8(ascii: "\n"))
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

    private func jsonLine(_ event: LogEvent, _ fields: [(key: String, value: Logger.MetadataValue)], into line: inout [UInt8]) {
        line.append(contentsOf: #"{"ts":""#.utf8)
        Self.appendTimestamp(to: &line)
        line.append(contentsOf: #"","level":"#.utf8)
        JSONText.appendQuoted(event.level.rawValue, to: &line)
        line.append(contentsOf: #","logger":"#.utf8)
        JSONText.appendQuoted(label, to: &line)
        line.append(contentsOf: #","msg":"#.utf8)
        JSONText.appendQuoted(event.message.description, to: &line)
        for (key, value) in fields {
            line.append(UInt8(ascii: ","))
            // A metadata key never hides one of the four fields.
            JSONText.appendQuoted(Self.reservedKeys.contains(key) ? "meta." + key : key, to: &line)
            line.append(UInt8(ascii: ":"))
            Self.appendValue(value, to: &line)
        }
        line.append(UInt8(ascii: "}"))
    }

    private func textLine(_ event: LogEvent, _ fields: [(key: String, value: Logger.MetadataValue)], into line: inout [UInt8]) {
        line.append(contentsOf: "ts=".utf8)
        Self.appendTimestamp(to: &line)
        line.append(contentsOf: " level=".utf8)
        line.append(contentsOf: event.level.rawValue.utf8)
        line.append(contentsOf: " logger=".utf8)
        Self.appendLogfmtValue(label, to: &line)
        line.append(contentsOf: " msg=".utf8)
        Self.appendLogfmtValue(event.message.description, to: &line)
        for (key, value) in fields {
            line.append(UInt8(ascii: " "))
            Self.appendLogfmtKey(Self.reservedKeys.contains(key) ? "meta." + key : key, to: &line)
            line.append(UInt8(ascii: "="))
            Self.appendLogfmtValue(value.description, to: &line)
        }
    }

    /// A logfmt key: letters, digits, `_`, `.` and `-`; anything else is `_`
    /// (a key with a space or `=` would split into others).
    static func appendLogfmtKey(_ key: String, to line: inout [UInt8]) {
        if key.isEmpty { line.append(UInt8(ascii: "_")) }
        for byte in key.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-"):
                line.append(byte)
            default: line.append(UInt8(ascii: "_"))
            }
        }
    }

    /// A logfmt value: bare when it has nothing that ends or breaks a bare
    /// value, else quoted, with `"`, `\` and control characters escaped.
    static func appendLogfmtValue(_ text: String, to line: inout [UInt8]) {
        let bare = !text.isEmpty && text.utf8.allSatisfy { byte in
            byte > 0x20 && byte != 0x7f && byte != UInt8(ascii: "=") && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
        }
        if bare {
            line.append(contentsOf: text.utf8)
            return
        }
        line.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): line.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): line.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\n"): line.append(contentsOf: #"\n"#.utf8)
            case UInt8(ascii: "\r"): line.append(contentsOf: #"\r"#.utf8)
            case UInt8(ascii: "\t"): line.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20, 0x7f:
                let hex = Array("0123456789abcdef".utf8)
                line.append(contentsOf: #"\u00"#.utf8)
                line.append(hex[Int(byte >> 4)])
                line.append(hex[Int(byte & 0x0f)])
            default: line.append(byte)
            }
        }
        line.append(UInt8(ascii: "\""))
    }

    /// `<N>`: the syslog priority journald reads off the front of a line.
    static func appendPriority(_ level: Logger.Level, to line: inout [UInt8]) {
        let priority: UInt8 = switch level {
        case .critical: 2
        case .error: 3
        case .warning: 4
        case .notice: 5
        case .info: 6
        case .debug, .trace: 7
        }
        line.append(UInt8(ascii: "<"))
        line.append(UInt8(ascii: "0") + priority)
        line.append(UInt8(ascii: ">"))
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

    /// Now in UTC as `2026-11-22T12:34:56.789Z` (`UTCTime`, as every time siwa writes).
    static func appendTimestamp(to line: inout [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        UTCTime.append(seconds: Int(now.tv_sec), milliseconds: Int(now.tv_nsec) / 1_000_000, to: &line)
    }
}

public enum LoggingSetup {
    /// Once per process, before anything logs. The lines get the syslog
    /// priority prefix when stderr is the journal (`JournalStream`).
    /// - Parameter tracing: the tracer's metadata (`trace_id`, `span_id`) of
    ///   the span a line is logged in, when tracing is on.
    public static func bootstrap(_ settings: LogSettings, tracing: Logger.MetadataProvider? = nil,
                                 environment: [String: String] = ProcessInfo.processInfo.environment) {
        let level = Logger.Level(rawValue: settings.level) ?? .info
        let journal = JournalStream.isConnected(STDERR_FILENO, environment: environment)
        LoggingSystem.bootstrap({ label, provider in
            var handler = LogLineHandler(label: label, format: settings.format, priorityPrefix: journal, metadataProvider: provider)
            handler.logLevel = level
            return handler
        }, metadataProvider: tracing.map { .multiplex([RequestLogContext.metadataProvider, $0]) } ?? RequestLogContext.metadataProvider)
    }
}

/// systemd's `JOURNAL_STREAM=DEVICE:INODE` names the stream it connected a
/// service's stdout or stderr to (sd-daemon(3)): a descriptor is the journal
/// when its device and inode are those. Compared, not merely present, so a
/// command run from a service's shell with its stderr sent elsewhere writes
/// plain lines.
public enum JournalStream {
    public static func isConnected(_ descriptor: Int32, environment: [String: String]) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return false }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
    }
}
