import ChildProcesses
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Debian's chromium, headless, driven over the DevTools protocol on a pipe
/// (`--remote-debugging-pipe`: it reads commands from fd 3 and writes
/// answers and events to fd 4, each a JSON text ending in a NUL byte). No
/// WebSocket, no port: one socket pair, both child descriptors on its end.
final class HeadlessChromium: Sendable {
    /// chromium on PATH (Debian's package installs /usr/bin/chromium).
    static var executable: String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            for name in ["chromium", "chromium-browser"] {
                let candidate = "\(directory)/\(name)"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            }
        }
        return nil
    }

    let process: ChildProcess
    let profile: URL
    private let socket: Int32
    /// Complete messages as they arrive, read by a thread of their own.
    private let inbox = Mutex<[Data]>([])
    private let closed = Mutex(false)

    init() throws {
        guard let executable = Self.executable else { throw TestSetupError("chromium is not installed") }
        var pair: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw TestSetupError("socketpair failed: \(errno)")
        }
        profile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-chromium-\(UUID().uuidString)")
        socket = pair[0]
        let log = profile.path + ".log"
        // --no-sandbox: the tests run as root, where chromium refuses its sandbox.
        process = try ChildProcess(executable: executable, arguments: [
            "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--user-data-dir=\(profile.path)",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
            "--disable-sync", "--hide-scrollbars", "--mute-audio", "--force-color-profile=srgb", "about:blank",
        ], environment: ProcessInfo.processInfo.environment, outputFile: log, descriptors: [(3, pair[1]), (4, pair[1])])
        close(pair[1])
        let reader = Thread { [self] in readMessages() }
        reader.start()
    }

    /// Blocking reads until chromium closes its end.
    private func readMessages() {
        var pending = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(socket, &buffer, buffer.count)
            guard count > 0 else { break }
            pending.append(contentsOf: buffer[0..<count])
            while let end = pending.firstIndex(of: 0) {
                let message = pending[pending.startIndex..<end]
                inbox.withLock { $0.append(Data(message)) }
                pending = Data(pending[(end + 1)...])
            }
        }
        closed.withLock { $0 = true }
    }

    func send(_ message: Data) throws {
        var bytes = [UInt8](message) + [0]
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeMutableBytes { write(socket, $0.baseAddress, $0.count) }
            guard written > 0 else { throw TestSetupError("chromium's pipe is closed (exit status \(process.status.map(String.init) ?? "none"))") }
            offset += written
        }
        bytes.removeAll()
    }

    /// The messages received since the last call.
    func take() -> [Data] {
        inbox.withLock { messages in
            defer { messages.removeAll() }
            return messages
        }
    }

    var isClosed: Bool { closed.withLock { $0 } }

    func stop() async {
        process.signal(SIGTERM)
        _ = await process.wait(atMost: .seconds(10))
        close(socket)
        try? FileManager.default.removeItem(at: profile)
    }
}

/// One page of a `HeadlessChromium`, for one test task: commands by id,
/// events kept until asked for, every wait with a deadline.
final class DevToolsPage {
    let browser: HeadlessChromium
    private(set) var session = ""
    private var nextID = 0
    private var events: [[String: Any]] = []
    private var answers: [Int: [String: Any]] = [:]

    private init(browser: HeadlessChromium) {
        self.browser = browser
    }

    /// Attaches to the browser's first page.
    static func open(_ browser: HeadlessChromium) async throws -> DevToolsPage {
        let page = DevToolsPage(browser: browser)
        let targets = try await page.call("Target.getTargets", session: nil)["targetInfos"] as? [[String: Any]] ?? []
        guard let target = targets.first(where: { $0["type"] as? String == "page" })?["targetId"] as? String else {
            throw TestSetupError("chromium has no page: \(targets)")
        }
        let attached = try await page.call("Target.attachToTarget", ["targetId": target, "flatten": true], session: nil)
        page.session = attached["sessionId"] as? String ?? ""
        for domain in ["Page.enable", "Network.enable", "Runtime.enable"] { _ = try await page.call(domain) }
        return page
    }

    /// A command's result; a protocol error throws.
    @discardableResult
    func call(_ method: String, _ params: [String: Any] = [:], session: String? = "",
              timeout: Duration = .seconds(30)) async throws -> [String: Any] {
        nextID += 1
        let id = nextID
        var message: [String: Any] = ["id": id, "method": method, "params": params]
        if let session { message["sessionId"] = session.isEmpty ? self.session : session }
        try browser.send(try JSONSerialization.data(withJSONObject: message))
        let answer = try await wait(timeout, "\(method)'s answer") { answers.removeValue(forKey: id) }
        if let error = answer["error"] { throw TestSetupError("\(method) failed: \(error)") }
        return answer["result"] as? [String: Any] ?? [:]
    }

    /// The next event `method` of this page (events before it are dropped).
    func event(_ method: String, timeout: Duration = .seconds(30)) async throws -> [String: Any] {
        try await wait(timeout, "the event \(method)") {
            guard let index = events.firstIndex(where: { $0["method"] as? String == method }) else { return nil }
            let event = events[index]
            events.removeFirst(index + 1)
            return event["params"] as? [String: Any] ?? [:]
        }
    }

    func forgetEvents() {
        drain()
        events.removeAll()
    }

    /// Loads `url` and waits for its load event.
    func navigate(_ url: String) async throws {
        forgetEvents()
        try await call("Page.navigate", ["url": url])
        _ = try await event("Page.loadEventFired")
    }

    /// A JavaScript expression's value (JSON-like).
    func evaluate(_ expression: String) async throws -> Any? {
        let result = try await call("Runtime.evaluate", ["expression": expression, "returnByValue": true])
        if let exception = result["exceptionDetails"] { throw TestSetupError("\(expression) threw: \(exception)") }
        return (result["result"] as? [String: Any])?["value"]
    }

    /// The whole page as PNG, `width` CSS pixels wide (`mobile`: a phone's
    /// viewport, as the page's meta viewport tells it).
    func screenshot(width: Int, mobile: Bool) async throws -> Data {
        try await call("Emulation.setDeviceMetricsOverride",
                       ["width": width, "height": mobile ? 844 : 900, "deviceScaleFactor": 1, "mobile": mobile])
        try await call("Page.reload")
        _ = try await event("Page.loadEventFired")
        let metrics = try await call("Page.getLayoutMetrics")
        let size = metrics["cssContentSize"] as? [String: Any] ?? [:]
        let height = min((size["height"] as? Double) ?? 900, 8000)
        let shot = try await call("Page.captureScreenshot", [
            "format": "png", "captureBeyondViewport": true,
            "clip": ["x": 0, "y": 0, "width": Double(width), "height": height, "scale": 1],
        ])
        guard let base64 = shot["data"] as? String, let png = Data(base64Encoded: base64) else {
            throw TestSetupError("no screenshot")
        }
        return png
    }

    private func drain() {
        for data in browser.take() {
            guard let message = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { continue }
            if let id = message["id"] as? Int {
                answers[id] = message
            } else if message["sessionId"] as? String == session || message["sessionId"] == nil {
                events.append(message)
            }
        }
    }

    private func wait<T>(_ timeout: Duration, _ what: String, _ found: () -> T?) async throws -> T {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            drain()
            if let value = found() { return value }
            if browser.isClosed { throw TestSetupError("chromium exited while waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw TestSetupError("no \(what) within \(timeout)")
    }
}
