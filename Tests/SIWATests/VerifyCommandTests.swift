import ChildProcesses
import Foundation
import Testing

/// `siwa verify` from the command line on the genuine tokens.
@Suite("siwa verify")
struct VerifyCommandTests {
    @Test(arguments: RealAppleTokenTests.tokens)
    func verifiesEveryGenuineToken(_ token: Fixtures.RealToken) async throws {
        let jwks = FileManager.default.temporaryDirectory.appendingPathComponent("jwks-\(UUID().uuidString).json")
        try token.jwks.write(to: jwks)
        defer { try? FileManager.default.removeItem(at: jwks) }

        let ok = try await runSIWA(["verify", token.token, "--jwks", jwks.path, "--at", String(Int(token.iat) + 1), "--client-id", token.aud])
        #expect(ok.status == 0, "\(ok.output)")
        let claims = try JSONSerialization.jsonObject(with: Data(ok.output.utf8)) as? [String: Any]
        #expect(claims?["aud"] as? String == token.aud)
        if token.kind == "notification" {
            // events printed decoded, as an object
            let events = claims?["events"] as? [String: Any]
            #expect(events?["type"] as? String == token.eventType)
        }

        let forged = try await runSIWA(["verify", RealAppleTokenTests.flipSignatureByte(token.token), "--jwks", jwks.path,
                                  "--at", String(Int(token.iat) + 1), "--client-id", token.aud])
        #expect(forged.status == 1)
        #expect(forged.output.contains("bad_signature"))

        let expired = try await runSIWA(["verify", token.token, "--jwks", jwks.path, "--at", String(Int(token.exp) + 3600),
                                   "--client-id", token.aud])
        #expect(expired.status == 1)
        #expect(expired.output.contains("expired"))
    }
}

struct ProcessResult {
    let status: Int32
    let output: String
}

/// Run the siwa executable to completion; output is stdout and stderr together.
func runSIWA(_ arguments: [String], environment: [String: String] = [:]) async throws -> ProcessResult {
    var env = ProcessInfo.processInfo.environment
    env.removeValue(forKey: "SIWA_APPLE_CLIENT_IDS")
    // Off unless the test asks: tests running at once would all take 8081 (workers 9091).
    env["SIWA_ADMIN_HTTP_PORT"] = "off"
    env["SIWA_WORKER_METRICS_PORT"] = "off"
    env["SIWA_ERASURE_LEDGER_DIR"] = TestEnvironment.erasureLedgerDirectory
    for (key, value) in environment { env[key] = value }
    return try await runToCompletion(try TestEnvironment.siwaBinary.path, arguments, environment: env)
}

/// Runs `executable` with exactly `environment` to completion; output is
/// stdout and stderr together. A command still running after 5 minutes is
/// killed and fails the test, instead of holding the run.
func runToCompletion(_ executable: String, _ arguments: [String], environment: [String: String]) async throws -> ProcessResult {
    let (status, output) = try await ChildProcess.run(executable, arguments, environment: environment, limit: .seconds(300))
    guard let status else { throw TestSetupError("\(executable) \(arguments.joined(separator: " ")) ran past 5 minutes; killed:\n\(output)") }
    return ProcessResult(status: status, output: output)
}
