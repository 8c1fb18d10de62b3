import Crypto
import Foundation
import Testing

/// SIWAClient's generated code (Sources/SIWAClient/Generated) is committed,
/// made by `make generate-client` from docs/openapi.yaml, which records the
/// checksums of what it read and wrote (scripts/openapi-generator/
/// generated-from.sha256). A document changed without regenerating, or
/// generated code edited by hand, fails here, without building the generator.
@Suite("SIWAClient's generated code")
struct GeneratedClientTests {
    static let root = TestEnvironment.repositoryRoot
    static let generated = "Sources/SIWAClient/Generated"

    static func sha256(_ path: String) throws -> String {
        SHA256.hash(data: try Data(contentsOf: root.appendingPathComponent(path))).map { String(format: "%02x", $0) }.joined()
    }

    @Test func theGeneratedCodeIsTheDocumentsAsItIs() throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent("scripts/openapi-generator/generated-from.sha256"), encoding: .utf8)
        var recorded: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { continue }
            recorded[parts[1].trimmingCharacters(in: .whitespaces)] = String(parts[0])
        }
        #expect(recorded["docs/openapi.yaml"] != nil && recorded["scripts/openapi-generator/openapi-generator-config.yaml"] != nil)
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent(Self.generated).path)
            .filter { $0.hasSuffix(".swift") }.map { "\(Self.generated)/\($0)" }
        #expect(Set(files) == Set(recorded.keys.filter { $0.hasPrefix(Self.generated) }),
                "the generated files are not the ones make generate-client wrote: run it and commit \(Self.generated)")
        for (path, sum) in recorded.sorted(by: { $0.key < $1.key }) {
            #expect(try Self.sha256(path) == sum, "\(path) changed since make generate-client: run it and commit \(Self.generated)")
        }
    }
}
