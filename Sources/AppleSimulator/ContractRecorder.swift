import Foundation
import Synchronization

/// What the test suite received from siwa, kept for the contract check
/// (`make test` sets `SIWA_TEST_OPENAPI_RECORD` to a file; at its end
/// scripts/openapi-check.py validates every line against docs/openapi.yaml):
/// each answer of siwa's listeners the tests got over HTTP, and each app
/// event `AppEventReceiver` was sent. One JSON object a line. Without the
/// setting, nothing is kept and nothing is written.
///
/// An answer is kept only from a port registered as one of siwa's
/// listeners (`register`): the suite also talks to the Apple simulator and
/// to stubs, which the document does not describe.
public enum ContractRecorder {
    public enum Listener: String, Sendable {
        case `public`, api, admin, metrics, worker
    }

    private struct State {
        var listeners: [Int: Listener] = [:]
        var file: FileHandle?
    }

    private static let state: Mutex<State> = {
        var state = State()
        if let path = ProcessInfo.processInfo.environment["SIWA_TEST_OPENAPI_RECORD"], !path.isEmpty {
            if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
            state.file = FileHandle(forWritingAtPath: path)
            _ = try? state.file?.seekToEnd()
        }
        return Mutex(state)
    }()

    public static var isRecording: Bool { state.withLock { $0.file != nil } }

    /// Answers from `127.0.0.1:port` are `listener`'s from now on (until
    /// `unregister`: a port is given back when its server stops).
    public static func register(port: Int, as listener: Listener) {
        state.withLock { $0.listeners[port] = listener }
    }

    public static func unregister(ports: [Int]) {
        state.withLock { state in
            for port in ports { state.listeners[port] = nil }
        }
    }

    /// An answer the suite received; kept if `url`'s port is a listener's.
    public static func answer(method: String, url: String, status: Int, contentType: String?, body: Data) {
        guard isRecording, let components = URLComponents(string: url), let port = components.port else { return }
        guard let listener = state.withLock({ $0.listeners[port] }) else { return }
        write([
            "kind": "http", "listener": listener.rawValue, "method": method, "path": components.percentEncodedPath,
            "status": status, "content_type": contentType ?? "", "body": String(decoding: body, as: UTF8.self),
        ])
    }

    /// An app event as it arrived (its Standard Webhooks headers and body).
    public static func event(headers: [String: String], body: Data) {
        guard isRecording else { return }
        write(["kind": "event", "headers": headers, "body": String(decoding: body, as: UTF8.self)])
    }

    private static func write(_ record: [String: Any]) {
        guard var line = try? JSONSerialization.data(withJSONObject: record, options: [.sortedKeys]) else { return }
        line.append(UInt8(ascii: "\n"))
        // One write per line, under the lock: concurrent tests never interleave.
        state.withLock { state in try? state.file?.write(contentsOf: line) }
    }
}
