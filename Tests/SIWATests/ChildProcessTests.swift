import ChildProcesses
import Foundation
import Testing

/// The children the tests, the demo and the bench start get no descriptor
/// of ours but the ones they ask for.
@Suite("Child processes")
struct ChildProcessTests {
    @Test func aChildInheritsOnlyTheDescriptorsItAskedFor() async throws {
        // A descriptor open without close-on-exec, as NIO's sockets are, at a
        // number no shell would open for itself.
        let opened = open("/dev/null", O_RDONLY)
        let leaked: Int32 = 200
        #expect(dup2(opened, leaked) == leaked)
        close(opened)
        defer { close(leaked) }
        var pipe: [Int32] = [0, 0]
        #expect(Glibc.pipe(&pipe) == 0)
        defer { close(pipe[0]); close(pipe[1]) }

        let output = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-fds-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        // The shell's listing of its descriptors (the glob's own directory
        // handle shows up too, as the lowest free number).
        let child = try ChildProcess(executable: "/bin/sh", arguments: ["-c", "cd /proc/self/fd && echo *"], environment: [:],
                                     outputFile: output, descriptors: [(child: 3, parent: pipe[1])])
        #expect(await child.wait() == 0)
        let open = try String(contentsOfFile: output, encoding: .utf8).split(separator: " ")
            .compactMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        #expect(open.contains(3), "the descriptor asked for is there: \(open)")
        #expect(!open.contains(leaked), "ours is not: \(open)")
        #expect(!open.contains(pipe[0]) || pipe[0] <= 4, "nor the pipe's other end: \(open)")
    }
}
