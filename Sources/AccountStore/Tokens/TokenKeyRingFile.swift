import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The key ring file (`SIWA_TOKEN_ENCRYPTION_KEYS_FILE`): one key a line,
/// `KEY_ID:BASE64_OF_32_BYTES`, the sealing key first; blank lines and
/// lines starting with `#` are ignored.
extension TokenKeyRing {
    /// The ring in `path`, and a warning for the caller to log when the
    /// file is readable or writable by its group or others. Errors are one
    /// line naming the file and the line, never a key.
    public static func load(path: String) throws -> (ring: TokenKeyRing, warning: String?) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw TokenKeyRingError.file(path: path, line: nil, problem: "cannot read it (\(readFailure(path)))")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw TokenKeyRingError.file(path: path, line: nil, problem: "is not UTF-8 text")
        }
        return (try parse(text, path: path), permissionWarning(path))
    }

    /// The ring in `text`; `path` only names it in errors.
    public static func parse(_ text: String, path: String) throws -> TokenKeyRing {
        var keys: [(id: String, bytes: Data)] = []
        var firstLine: [String: Int] = [:]
        // "\r\n" is one Character in Swift, so split on newline Characters
        // (not on "\n") to count a CRLF file's lines right.
        for (index, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let number = index + 1
            let line = rawLine.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            func fail(_ problem: String) -> TokenKeyRingError { .file(path: path, line: number, problem: problem) }
            // Nothing of the line is quoted back unless it is a well-formed
            // key id: a line without a colon may be a bare key.
            guard let colon = line.firstIndex(of: ":") else {
                throw fail("expected KEY_ID:BASE64_OF_32_BYTES (no ':')")
            }
            let id = line[..<colon].trimmingCharacters(in: .whitespaces)
            let material = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard isValidKeyID(id) else { throw fail(keyIDRule) }
            if let first = firstLine[id] { throw fail("key id '\(id)' is already on line \(first)") }
            guard !material.isEmpty else { throw fail("key '\(id)' has no key after ':'") }
            guard let bytes = Data(base64Encoded: material) else { throw fail("key '\(id)' is not valid base64") }
            guard bytes.count == 32 else { throw fail("key '\(id)' is \(bytes.count) bytes; AES-256 needs 32 (siwa tokens keygen makes one)") }
            firstLine[id] = number
            keys.append((id, bytes))
        }
        guard !keys.isEmpty else {
            throw TokenKeyRingError.file(path: path, line: nil,
                                         problem: "holds no key (one a line, KEY_ID:BASE64_OF_32_BYTES; siwa tokens keygen makes one)")
        }
        return try TokenKeyRing(keys: keys)
    }

    /// A line for the log when others than the owner may read the file.
    static func permissionWarning(_ path: String) -> String? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        let mode = status.st_mode & 0o777
        guard mode & 0o077 != 0 else { return nil }
        return "\(path) is readable by others than its owner (mode \(String(mode, radix: 8))); the keys decrypt every stored Apple token: chmod 600 it"
    }

    private static func readFailure(_ path: String) -> String {
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) { return "no such file" }
        if isDirectory.boolValue { return "a directory" }
        if !FileManager.default.isReadableFile(atPath: path) { return "permission denied" }
        return "read error"
    }
}
