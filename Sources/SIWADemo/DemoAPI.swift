import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
import Glibc
#endif

/// What the demo's `/v1` parts share: an API key of their own and a call
/// made with it.
extension Demo {
    /// `siwa api-keys create NAME` as the owner (an admin would use their own role).
    func createAPIKey(named name: String, scope: String = "app") async throws -> String {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-demo-key-\(name)-\(getpid()).log").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let command = try spawn("api-keys", arguments: ["create", name, "--scope", scope],
                                environment: ["SIWA_DATABASE_URL": database.ownerURL, "SIWA_LOG_LEVEL": "warning"],
                                outputFile: output)
        let status = await command.wait()
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        guard status == 0, let key = text.split(separator: "\n").last.map(String.init), key.hasPrefix("siwa_") else {
            throw DemoError("siwa api-keys create failed (exit status \(status)): \(text)")
        }
        return key
    }

    /// One `/v1` call with `key`: "STATUS BODY".
    static func send(_ method: HTTPMethod, _ url: String, key: String, body: Data? = nil) async throws -> String {
        var request = HTTPClientRequest(url: url)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(key)")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(15))
        let bytes = try await response.body.collect(upTo: 64 * 1024)
        return "\(response.status.code) \(String(buffer: bytes))"
    }
}
