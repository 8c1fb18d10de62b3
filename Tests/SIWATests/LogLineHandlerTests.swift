import AccountLifecycle
import SIWAConfiguration
import Foundation
import Logging
import SIWAServer
import Testing

/// The hand-written log lines: JSON ones parse as JSON, text ones stay one
/// line per event, and both say what was logged.
@Suite("Log lines")
struct LogLineHandlerTests {
    /// What a handler writes, through a temporary file.
    func output(_ format: LogSettings.Format, priorityPrefix: Bool = false, metadataProvider: Logger.MetadataProvider? = nil,
                _ body: (Logger) -> Void) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-log-\(UUID().uuidString)").path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(descriptor >= 0)
        defer { unlink(path) }
        var logger = Logger(label: "siwa.test") { label in
            LogLineHandler(label: label, format: format, fileDescriptor: descriptor, priorityPrefix: priorityPrefix,
                           metadataProvider: metadataProvider)
        }
        logger[metadataKey: "worker"] = "w1"
        body(logger)
        close(descriptor)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.isEmpty || text.hasSuffix("\n"))
        return text
    }

    /// JSON lines, parsed.
    func lines(provider: Logger.MetadataProvider? = nil, _ body: (Logger) -> Void) throws -> [[String: Any]] {
        try output(.json, metadataProvider: provider, body).split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        }
    }

    @Test func textLinesAreLogfmtOneLinePerEvent() throws {
        let text = try output(.text) { logger in
            logger.info("first\nforged line", metadata: ["b": "2", "a": "x\ny"])
            logger.warning("second")
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        try #require(lines.count == 2, "\(text)")
        #expect(lines[0].wholeMatch(of: /ts=\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z level=info logger=siwa\.test msg="first\\nforged line" a="x\\ny" b=2 worker=w1/) != nil,
                "\(lines[0])")
        #expect(lines[1].hasSuffix(" level=warning logger=siwa.test msg=second worker=w1"), "\(lines[1])")
    }

    /// Read back by a logfmt parser (Logfmt below, written to the format's
    /// grammar: bare or quoted values, escapes inside quotes), every value
    /// is what was logged and no value made a key of its own.
    @Test func textLinesParseAsLogfmtAndNoValueForgesAKey() throws {
        let hostile = #"x=1 level=critical msg="forged" "quoted" back\slash tab\#t end"#
        let values: [String: String] = ["plain": "ok", "spaces": "a b c", "forger": hostile, "empty": "",
                                        "eq": "a=b", "control": "bell\u{07}del\u{7f}", "unicode": "é 🍎"]
        let text = try output(.text) { logger in
            logger.notice("\(hostile)", metadata: values.mapValues { .string($0) }.merging(["bad key=x": "k", "msg": "meta"]) { $1 })
        }
        let line = try #require(text.split(separator: "\n").first.map(String.init))
        let pairs = try Logfmt.parse(line)
        let keys = pairs.map(\.key)
        #expect(keys == ["ts", "level", "logger", "msg", "bad_key_x", "control", "empty", "eq", "forger", "meta.msg", "plain", "spaces",
                         "unicode", "worker"], "\(line)")
        let parsed = Dictionary(pairs.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
        #expect(parsed["msg"] == hostile && parsed["level"] == "notice" && parsed["meta.msg"] == "meta", "\(line)")
        for (key, value) in values { #expect(parsed[key] == value, "\(key): \(parsed[key] ?? "nil") in \(line)") }
    }

    @Test func escapesAndNestsValues() throws {
        let awkward = "quote \" backslash \\ newline \n tab \t bell \u{07} é 🍎"
        let logged = try lines { logger in
            logger.info("\(awkward)", metadata: [
                "text": "\(awkward)", "count": "\(42)", "list": ["a", "\"b\""],
                "nested": ["inner": ["x": "1"]], "msg": "not the message",
            ])
            logger.warning("second")
        }
        try #require(logged.count == 2)
        let first = logged[0]
        #expect(first["msg"] as? String == awkward)
        #expect(first["text"] as? String == awkward)
        #expect(first["level"] as? String == "info")
        #expect(first["logger"] as? String == "siwa.test")
        #expect(first["count"] as? String == "42")
        #expect(first["list"] as? [String] == ["a", "\"b\""])
        #expect((first["nested"] as? [String: Any])?["inner"] as? [String: String] == ["x": "1"])
        #expect(first["meta.msg"] as? String == "not the message", "a metadata key must not replace the message")
        #expect(first["worker"] as? String == "w1", "the handler's own metadata")
        #expect(logged[1]["level"] as? String == "warning")
    }

    @Test func timestampIsUTCWithMilliseconds() throws {
        let before = Date()
        let logged = try lines { $0.info("now") }
        let after = Date()
        let stamp = try #require(logged.first?["ts"] as? String)
        #expect(stamp.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil, "\(stamp)")
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let parsed = try #require(formatter.date(from: stamp))
        #expect(parsed >= before.addingTimeInterval(-0.002) && parsed <= after.addingTimeInterval(0.002), "\(stamp)")
    }

    /// Under systemd each line starts with its syslog priority, which
    /// journald strips and records (`journalctl -p warning`).
    @Test func journalLinesStartWithTheirPriority() throws {
        for format in [LogSettings.Format.text, .json] {
            let text = try output(format, priorityPrefix: true) { logger in
                var everything = logger
                everything.logLevel = .trace
                everything.trace("t")
                everything.debug("d")
                everything.info("i")
                everything.notice("n")
                everything.warning("w")
                everything.error("e")
                everything.critical("c")
            }
            let prefixes = text.split(separator: "\n").map { String($0.prefix(3)) }
            #expect(prefixes == ["<7>", "<7>", "<6>", "<5>", "<4>", "<3>", "<2>"], "\(text)")
            if format == .json {
                // What journald keeps, past the prefix, is still one JSON object.
                for line in text.split(separator: "\n") {
                    #expect((try? JSONSerialization.jsonObject(with: Data(line.dropFirst(3).utf8))) is [String: Any], "\(line)")
                }
            }
        }
        #expect(try output(.text) { $0.warning("plain") }.hasPrefix("ts="), "no prefix outside the journal")
    }

    /// `JOURNAL_STREAM` counts only when it names the descriptor's own
    /// device and inode (sd-daemon(3)).
    @Test func theJournalIsRecognisedByDeviceAndInode() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-journal-\(UUID().uuidString)").path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(descriptor >= 0)
        defer {
            close(descriptor)
            unlink(path)
        }
        var status = stat()
        try #require(fstat(descriptor, &status) == 0)
        #expect(JournalStream.isConnected(descriptor, environment: ["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino)"]))
        #expect(!JournalStream.isConnected(descriptor, environment: ["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino + 1)"]))
        #expect(!JournalStream.isConnected(descriptor, environment: ["JOURNAL_STREAM": "junk"]))
        #expect(!JournalStream.isConnected(descriptor, environment: [:]))
    }

    /// swift-log's metadata provider is honoured: the request a line is
    /// about (RequestLogContext) is in it, whichever logger writes it; the
    /// call's own metadata wins over the provider's.
    @Test func metadataProvidersAreHonoured() throws {
        let logged = try RequestLogContext.$requestID.withValue("req-1") {
            try lines(provider: RequestLogContext.metadataProvider) { logger in
                logger.info("about the request")
                logger.info("overridden", metadata: ["request_id": "explicit"])
            }
        }
        let outside = try lines(provider: RequestLogContext.metadataProvider) { $0.info("no request") }
        #expect(logged.map { $0["request_id"] as? String } == ["req-1", "explicit"])
        #expect(outside.first?["request_id"] == nil)
    }

    @Test func levelFilterApplies() throws {
        let logged = try lines { logger in
            var quiet = logger
            quiet.logLevel = .notice
            quiet.info("dropped")
            quiet.notice("kept")
        }
        #expect(logged.map { $0["msg"] as? String } == ["kept"])
    }
}
