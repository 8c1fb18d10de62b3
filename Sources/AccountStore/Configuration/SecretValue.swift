import Foundation

/// Where a secret's value comes from: the variable itself (`NAME`), a file
/// that `NAME_FILE` names, or the systemd credential `NAME` (a file in
/// `$CREDENTIALS_DIRECTORY`, which `LoadCredential=` fills). A file keeps
/// the secret out of every environment (`/proc/PID/environ`, a child's
/// inherited variables, an env file shown in a ticket).
///
/// Two sources for one name is refused rather than ranked: an operator who
/// moved a password into a file and forgot the old line would otherwise
/// run with whichever one siwa happened to prefer. A credential of white
/// space only is no value: the units pair each `LoadCredential=` with such a
/// `SetCredential=` default, so a missing file is no start-up failure.
public enum SecretValue {
    public static let credentialsVariable = "CREDENTIALS_DIRECTORY"
    /// A secret file larger than this is no password or key.
    static let maxBytes = 64 * 1024

    /// `NAME`'s value from wherever it was given; nil when from nowhere.
    /// Trailing newlines of a file are dropped (`echo ... > file` adds one).
    public static func value(of name: String, in environment: [String: String]) throws(SettingError) -> String? {
        var given: [(source: String, value: String)] = []
        if let direct = environment[name], !direct.isEmpty { given.append((name, direct)) }
        if let path = environment[name + "_FILE"], !path.isEmpty {
            given.append((name + "_FILE", try read(path, for: name + "_FILE")))
        }
        if let path = credentialFile(name, in: environment), !credentialIsEmpty(path) {
            given.append(("the credential \(name) ($\(credentialsVariable))", try read(path, for: "the credential \(name)")))
        }
        guard given.count <= 1 else {
            throw SettingError(name, "is given \(given.count) ways (\(given.map(\.source).joined(separator: ", "))): keep one")
        }
        return given.first?.value
    }

    /// The path of the credential `name`, when the unit loaded one (empty
    /// or not); for settings whose value is a file's path (a key file).
    public static func credentialFile(_ name: String, in environment: [String: String]) -> String? {
        guard let directory = environment[credentialsVariable], !directory.isEmpty,
              !name.contains("/"), !name.hasPrefix(".") else { return nil }
        let path = URL(fileURLWithPath: directory).appendingPathComponent(name).path
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }

    /// Whether the credential file holds nothing but white space (the
    /// units' `SetCredential=NAME:\\n` default when its file is missing:
    /// systemd refuses an empty one).
    public static func credentialIsEmpty(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: 16)) ?? Data()
        return head.count < 16 && head.allSatisfy { $0 == 0x0A || $0 == 0x0D || $0 == 0x20 || $0 == 0x09 }
    }

    private static func read(_ path: String, for source: String) throws(SettingError) -> String {
        guard path.hasPrefix("/") else { throw SettingError(source, "\(path): give an absolute path") }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "permission denied" : "no such file"
            throw SettingError(source, "cannot read \(path) (\(reason))")
        }
        defer { try? handle.close() }
        guard let data = try? handle.read(upToCount: maxBytes + 1) ?? Data() else {
            throw SettingError(source, "cannot read \(path) (a directory?)")
        }
        guard data.count <= maxBytes else { throw SettingError(source, "\(path) is larger than \(maxBytes / 1024) KiB") }
        guard var text = String(data: data, encoding: .utf8) else { throw SettingError(source, "\(path) is not UTF-8 text") }
        while text.last == "\n" || text.last == "\r" { text.removeLast() }
        guard !text.contains("\n") else {
            throw SettingError(source, "\(path) has more than one line (a secret file holds the value alone)")
        }
        return text
    }
}

/// A setting that is missing or malformed, or a secret given in a way that
/// cannot be used (never its value): start-up stops with this one line.
public struct SettingError: Error, CustomStringConvertible, Sendable {
    public let name: String
    public let problem: String
    public init(_ name: String, _ problem: String) {
        self.name = name
        self.problem = problem
    }
    public var description: String { "\(name): \(problem)" }
}
