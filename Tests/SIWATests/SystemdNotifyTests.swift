import AppleSimulator
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Type=notify: a real `siwa serve` and `siwa worker` tell the socket in
/// NOTIFY_SOCKET READY=1 once they can work, WATCHDOG=1 while their event
/// loops answer, and STOPPING=1 when SIGTERM starts the shutdown.
@Suite("systemd notifications", .testDatabases, .timeLimit(.minutes(5)))
struct SystemdNotifyTests {
    /// With sign-in on: READY=1 waits for the API listener (`/v1`) too.
    @Test func serveSaysReadyFeedsTheWatchdogAndSaysStopping() async throws {
        let database = try await TestDatabase.create()
        let apple = try AppleSimulator()
        let appleServer = try await TestPorts.serve { try await apple.start(port: $0) }
        try atTestEnd { await appleServer.stop() }
        let files = try SignInFixture.files()
        try atTestEnd { files.remove() }
        files.register(with: apple)
        let socket = try NotifySocket(abstract: false)
        let siwa = try await SIWAProcess.serve(environment: SignInFixture.settings(files, appleBaseURL: appleServer.baseURL).merging([
            "SIWA_DATABASE_URL": database.serveURL, "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": ServerHarness.clientID,
            "SIWA_APPLE_JWKS_URL": appleServer.baseURL + "/auth/keys",
            "NOTIFY_SOCKET": socket.address, "WATCHDOG_USEC": "400000",
        ]) { $1 })
        try atTestEnd { await siwa.kill9() }
        try await socket.waitFor("READY=1", timeout: .seconds(30))
        // Ready means serving: both ports answer (/v1 without a key: 401).
        let ready = try await HTTPAnswer.send(method: .GET, url: "http://127.0.0.1:\(siwa.port)/readyz", body: nil, headers: [],
                                              timeout: .seconds(5))
        #expect(ready.status == 200)
        let v1 = try await HTTPAnswer.send(method: .GET, url: "http://127.0.0.1:\(siwa.apiPort)/v1/users/001.ready.0001", body: nil,
                                           headers: [], timeout: .seconds(5))
        #expect(v1.status == 401, "\(v1.status) \(v1.text)")
        // Every 0.2 s (half of WATCHDOG_USEC): several in a few seconds.
        try await socket.waitFor("WATCHDOG=1", count: 3, timeout: .seconds(20))
        let status = await siwa.terminate()
        #expect(status == 0, "\(siwa.log.suffix(2000))")
        try await socket.waitFor("STOPPING=1", timeout: .seconds(5))
        #expect(socket.received.first?.hasPrefix("READY=1") == true, "\(socket.received)")
    }

    /// The worker, with the socket in the abstract namespace (`@name`).
    @Test func theWorkerSpeaksToAnAbstractSocket() async throws {
        let database = try await TestDatabase.create()
        let socket = try NotifySocket(abstract: true)
        let worker = try SIWAProcess(environment: [
            "SIWA_DATABASE_URL": database.workerURL, "NOTIFY_SOCKET": socket.address, "WATCHDOG_USEC": "400000",
        ], arguments: ["worker"])
        try atTestEnd { await worker.kill9() }
        try await socket.waitFor("READY=1", timeout: .seconds(30))
        try await socket.waitFor("WATCHDOG=1", count: 2, timeout: .seconds(20))
        let status = await worker.terminate()
        #expect(status == 0, "\(worker.log.suffix(2000))")
        try await socket.waitFor("STOPPING=1", timeout: .seconds(5))
    }

    /// WATCHDOG_PID names another process: the watchdog is not this one's.
    @Test func noWatchdogForAnotherProcess() async throws {
        let database = try await TestDatabase.create()
        let socket = try NotifySocket(abstract: false)
        let worker = try SIWAProcess(environment: [
            "SIWA_DATABASE_URL": database.workerURL, "NOTIFY_SOCKET": socket.address, "WATCHDOG_USEC": "200000",
            "WATCHDOG_PID": "1",
        ], arguments: ["worker"])
        try atTestEnd { await worker.kill9() }
        try await socket.waitFor("READY=1", timeout: .seconds(30))
        try await Task.sleep(for: .seconds(1))
        #expect(!socket.received.contains("WATCHDOG=1"), "\(socket.received)")
        _ = await worker.terminate()
    }
}

/// A Unix datagram socket standing for systemd's notification socket.
final class NotifySocket: Sendable {
    let address: String
    private let descriptor: Int32
    private let path: String?
    private let messages = Locked<[String]>([])

    init(abstract: Bool) throws {
        let name = "siwa-notify-\(UUID().uuidString.prefix(8))"
        let path = abstract ? nil : FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        address = path ?? "@" + name
        self.path = path
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw TestSetupError("socket: \(errno)") }
        var sockaddress = sockaddr_un()
        sockaddress.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(address.utf8)
        if abstract { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &sockaddress.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout.offset(of: \sockaddr_un.sun_path)! + bytes.count)
        let bound = withUnsafePointer(to: &sockaddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        guard bound == 0 else { close(descriptor); throw TestSetupError("bind \(address): \(errno)") }
    }

    /// Every datagram so far, each as sent.
    var received: [String] {
        drain()
        return messages.withLock { $0 }
    }

    func waitFor(_ state: String, count: Int = 1, timeout: Duration) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if received.filter({ $0.split(separator: "\n").contains(Substring(state)) }).count >= count { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestSetupError("no \(count) × \(state) within \(timeout): \(received)")
    }

    private func drain() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let read = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            guard read > 0 else { return }
            let text = String(decoding: buffer[0..<read], as: UTF8.self)
            messages.withLock { $0.append(text) }
        }
    }

    deinit {
        close(descriptor)
        if let path { unlink(path) }
    }
}
