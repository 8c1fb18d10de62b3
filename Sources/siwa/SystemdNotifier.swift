import AccountStore
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// systemd's notification protocol (sd_notify(3)), which is one datagram
/// of `NAME=value` lines to the Unix socket `$NOTIFY_SOCKET` (a path, or
/// `@name` in the abstract namespace). Written here rather than linking
/// libsystemd: it is a dozen lines, and the binary stays free of it.
/// Without `NOTIFY_SOCKET` (not under systemd, or Type= not notify) there
/// is no notifier and nothing is sent.
struct SystemdNotifier: Sendable {
    let socket: String
    /// Half of `WATCHDOG_USEC`, when systemd asks for a watchdog of this process.
    let watchdogPing: Duration?

    init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let socket = environment["NOTIFY_SOCKET"], socket.hasPrefix("/") || socket.hasPrefix("@"),
              socket.utf8.count < 108 else { return nil }
        self.socket = socket
        // WATCHDOG_PID: the watchdog is the main process's; a child started
        // with the service's environment must not feed it.
        let forUs = environment["WATCHDOG_PID"].map { Int32($0) == getpid() } ?? true
        if forUs, let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 {
            watchdogPing = .microseconds(usec / 2)
        } else {
            watchdogPing = nil
        }
    }

    /// What serve and the worker wait with at start: while an upgrade's
    /// migration is pending, `systemctl status` says so, and which.
    static func migrationWait(_ notifier: SystemdNotifier?) -> MigrationWait {
        var wait = MigrationWait()
        if let notifier {
            wait.onWaiting = { pending in notifier.send("STATUS=Waiting for siwa migrate (pending: \(pending.joined(separator: ", ")))") }
        }
        return wait
    }

    /// Sends one state (`READY=1`, `STOPPING=1`, `WATCHDOG=1`, `STATUS=...`);
    /// false when it could not be sent (systemd then says so itself, by a
    /// start-up timeout or a watchdog kill).
    @discardableResult
    func send(_ state: String) -> Bool {
        let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socket.utf8)
        // `@name`: the abstract namespace, whose name starts with a NUL
        // byte and is exactly as long as the address length says.
        if path.first == UInt8(ascii: "@") { path[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: path)
        }
        // sun_path follows sun_family.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        let bytes = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bytes.withUnsafeBytes { sendto(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), address, length) }
            }
        }
        return sent == bytes.count
    }
}

/// A count of things to wait for (the listeners bound, the database
/// answered) before the process tells systemd it is ready.
final class ReadinessGate: Sendable {
    private let state: Mutex<(remaining: Int, waiters: [CheckedContinuation<Void, Never>])>

    init(waitingFor count: Int) { state = Mutex((max(0, count), [])) }

    func arrive() {
        let resumed = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.remaining = max(0, state.remaining - 1)
            guard state.remaining == 0 else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in resumed { waiter.resume() }
    }

    /// Lets every waiter go (a shutdown before the process was ready).
    func open() {
        let resumed = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.remaining = 0
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in resumed { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.remaining == 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// The service that speaks to systemd: `READY=1` once `gate` opens,
/// `WATCHDOG=1` every half watchdog interval while the event loops answer,
/// and `STOPPING=1` as soon as a graceful shutdown begins. Put it last in
/// its service group, so it is told of the shutdown first.
struct SystemdNotifyService: Service {
    let notifier: SystemdNotifier
    let gate: ReadinessGate
    let status: String
    let logger: Logger

    func run() async throws {
        await withGracefulShutdownHandler {
            await withTaskCancellationOrGracefulShutdownHandler {
                await gate.wait()
            } onCancelOrGracefulShutdown: {
                gate.open()
            }
            guard !Task.isShuttingDownGracefully else { return }
            notifier.send("READY=1\nSTATUS=\(status)")
            logger.debug("Told systemd READY=1")
            guard let interval = notifier.watchdogPing else {
                try? await gracefulShutdown()
                return
            }
            while !Task.isShuttingDownGracefully {
                // A round trip through every event loop: a loop that is stuck
                // never answers, no ping goes out, and systemd's watchdog
                // (WatchdogSec=) is this wait's deadline: it kills the process.
                for loop in MultiThreadedEventLoopGroup.singleton.makeIterator() {
                    _ = try? await loop.submit {}.get()
                }
                notifier.send("WATCHDOG=1")
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            }
        } onGracefulShutdown: {
            notifier.send("STOPPING=1")
        }
    }
}
