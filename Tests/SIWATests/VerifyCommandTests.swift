import Foundation
import Testing

/// `siwa verify` from the command line on the genuine tokens.
@Suite("siwa verify")
struct VerifyCommandTests {
    @Test(arguments: RealAppleTokenTests.tokens)
    func verifiesEveryGenuineToken(_ token: Fixtures.RealToken) throws {
        let jwks = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json")
        try token.jwks.write(to: jwks)
        defer { try? FileManager.default.removeItem(at: jwks) }

        let ok = try runSIWA(["verify", token.token, "--jwks", jwks.path, "--at", String(Int(token.iat) + 1), "--client-id", token.aud])
        #expect(ok.status == 0, "\(ok.output)")
        let claims = try JSONSerialization.jsonObject(with: Data(ok.output.utf8)) as? [String: Any]
        #expect(claims?["aud"] as? String == token.aud)
        if token.kind == "notification" {
            // events printed decoded, as an object
            let events = claims?["events"] as? [String: Any]
            #expect(events?["type"] as? String == token.eventType)
        }

        let forged = try runSIWA(["verify", RealAppleTokenTests.flipSignatureByte(token.token), "--jwks", jwks.path,
                                  "--at", String(Int(token.iat) + 1), "--client-id", token.aud])
        #expect(forged.status == 1)
        #expect(forged.output.contains("bad_signature"))

        let expired = try runSIWA(["verify", token.token, "--jwks", jwks.path, "--at", String(Int(token.exp) + 3600),
                                   "--client-id", token.aud])
        #expect(expired.status == 1)
        #expect(expired.output.contains("expired"))
    }
}

struct ProcessResult {
    let status: Int32
    let output: String
    let error: String
}

func runSIWA(_ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
    let process = Process()
    process.executableURL = try TestEnvironment.siwaBinary
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    env.removeValue(forKey: "SIWA_APPLE_CLIENT_IDS")
    for (key, value) in environment { env[key] = value }
    process.environment = env
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let output = out.fileHandleForReading.readDataToEndOfFile()
    let error = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return ProcessResult(status: process.terminationStatus, output: String(decoding: output, as: UTF8.self),
                         error: String(decoding: error, as: UTF8.self))
}
