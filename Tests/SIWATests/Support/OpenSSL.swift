import Foundation

/// The `openssl` command line, an ECDSA implementation that shares no code
/// with siwa or swift-crypto, for checking what siwa signs.
enum OpenSSL {
    /// Runs `openssl arguments` in `directory`; its exit status and its
    /// stdout and stderr together.
    static func run(_ arguments: [String], in directory: URL) async throws -> (status: Int32, output: String) {
        let command = "cd '\(directory.path)' && exec openssl " + arguments.map { "'\($0)'" }.joined(separator: " ")
        let result = try await runToCompletion("/bin/sh", ["-c", command],
                                               environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"])
        return (result.status, result.output)
    }

    /// DER `ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER }` from the
    /// JOSE form R‖S (two 32-byte big-endian numbers), written by hand so
    /// the conversion is not the signing library's own.
    static func derSignature(rawRS: Data) -> Data {
        func integer(_ bytes: Data) -> [UInt8] {
            var value = Array(bytes.drop(while: { $0 == 0 }))
            if value.isEmpty { value = [0] }
            if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(rawRS.prefix(32)) + integer(rawRS.suffix(32))
        return Data([0x30, UInt8(body.count)] + body)
    }

    /// A fresh directory under the system's temporary directory.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-openssl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
