import AccountStore
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The erasure ledger: who siwa erased, kept outside the database so that
/// a restored backup cannot forget it (`siwa erasures reapply`). One file
/// per worker process in SIWA_ERASURE_LEDGER_DIR,
/// `erasures-<UTC start>-<host>-<pid>.jsonl`, opened at start; one line per
/// completed erasure (ErasureLedgerLine), appended with one write(2) per
/// batch and fsync(2)ed before the transaction that completes the jobs
/// commits. A file of its own per process: workers never interleave, and a
/// failed write is cut back to the last whole line.
///
/// A line may so precede a completion that then fails to commit (the
/// database went away between the fsync and the COMMIT): the job runs
/// again, and a reapply after a restore purges that sub once more, which is
/// harmless. The reverse, a committed erasure with no line, cannot happen.
public final class ErasureLedger: ErasureLedgerWriting, Sendable {
    public let directory: String
    /// This process's file.
    public let path: String
    /// nil: receipts are off, the lines are unsigned.
    public let signer: ErasureLedgerSigner?

    private struct File {
        let descriptor: Int32
        /// Bytes of whole lines: a failed append is cut back to it.
        var size: off_t
    }
    private let file: Mutex<File>

    private init(directory: String, path: String, signer: ErasureLedgerSigner?, descriptor: Int32, size: off_t) {
        self.directory = directory
        self.path = path
        self.signer = signer
        file = Mutex(File(descriptor: descriptor, size: size))
    }

    deinit {
        file.withLock { _ = close($0.descriptor) }
    }

    /// Creates `directory` if missing (mode 0700) and this process's file in
    /// it, and syncs both: a directory the worker cannot write stops it at
    /// start, not at the first purge. The error is one line naming the path.
    public static func open(directory: String, signer: ErasureLedgerSigner?, processName: String,
                            now: Date = Date()) throws(ErasureLedgerError) -> ErasureLedger {
        guard directory.hasPrefix("/") else { throw ErasureLedgerError("\(directory): must be an absolute path") }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw ErasureLedgerError("\(directory): exists and is not a directory") }
        } else if let why = Self.makeDirectory(directory) {
            throw ErasureLedgerError("\(directory): cannot create the directory (\(why)); "
                + "the worker appends every completed erasure there (siwa-worker.service: StateDirectory=siwa/erasures)")
        }
        // `20261123T151057Z`: ISO 8601's basic form, no ':' in a file name.
        let stamp = UTCTime.text(now, .seconds).filter { $0 != "-" && $0 != ":" }
        let name = "erasures-\(stamp)-\(Self.fileNamePart(processName)).jsonl"
        let path = (directory as NSString).appendingPathComponent(name)
        let descriptor = openFile(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw ErasureLedgerError("\(directory): cannot create a file in it (\(Self.lastError())): the worker must be able to write it")
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0, fsync(descriptor) == 0, Self.syncDirectory(directory) else {
            let why = Self.lastError()
            _ = close(descriptor)
            throw ErasureLedgerError("\(path): cannot sync it (\(why))")
        }
        return ErasureLedger(directory: directory, path: path, signer: signer, descriptor: descriptor, size: status.st_size)
    }

    /// Appends one line per record and syncs the file; throws (cutting the
    /// file back to its last whole line) if either fails.
    public func append(_ records: [ErasureRecord]) throws {
        guard !records.isEmpty else { return }
        let text = try records.map { try ErasureLedgerLine.encode($0, signer: signer) }.joined()
        let bytes = Array(text.utf8)
        try file.withLock { file in
            var written = 0
            while written < bytes.count {
                let count = bytes[written...].withUnsafeBytes { write(file.descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else {
                    let why = Self.lastError()
                    _ = ftruncate(file.descriptor, file.size)
                    throw ErasureLedgerError("\(path): cannot append (\(why))")
                }
                written += count
            }
            guard fsync(file.descriptor) == 0 else {
                let why = Self.lastError()
                _ = ftruncate(file.descriptor, file.size)
                throw ErasureLedgerError("\(path): cannot sync (\(why))")
            }
            file.size += off_t(bytes.count)
        }
    }

    /// The directory's entry for a new file is durable only once the directory is synced.
    private static func syncDirectory(_ directory: String) -> Bool {
        let descriptor = openFile(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { _ = close(descriptor) }
        return fsync(descriptor) == 0
    }

    /// `host:pid` as a file name can hold it.
    static func fileNamePart(_ processName: String) -> String {
        String(processName.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") ? $0 : "-" }.prefix(100))
    }

    private static func lastError() -> String { String(cString: strerror(errno)) }

    /// mkdir -p: the parents 0755 as usual, the ledger's own 0700. The reason when it fails.
    private static func makeDirectory(_ directory: String) -> String? {
        var path = ""
        let components = directory.split(separator: "/")
        for (index, component) in components.enumerated() {
            path += "/" + component
            if mkdir(path, index == components.count - 1 ? 0o700 : 0o755) != 0 && errno != EEXIST { return lastError() }
        }
        return nil
    }
}

private func openFile(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
    #if canImport(Glibc)
    Glibc.open(path, flags, mode)
    #else
    Darwin.open(path, flags, mode)
    #endif
}

/// Why the ledger cannot be opened or written: one line naming the path.
public struct ErasureLedgerError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
