import Foundation
import Testing

/// docs/requirements.md's "Dependencies" table says what siwa is tested with: each
/// package's `from:` as Package.swift has it, and the version this build
/// resolved (Package.resolved, written by `swift build`).
@Suite("Dependency versions")
struct DependencyVersionsTests {
    static let root = TestEnvironment.repositoryRoot

    /// The table's rows between the markers: package -> (asks, tested).
    static func documentedTable() throws -> [String: (asks: String, tested: String)] {
        let page = try String(contentsOf: root.appendingPathComponent("docs/requirements.md"), encoding: .utf8)
        guard let start = page.range(of: "<!-- dependency versions -->"),
              let end = page.range(of: "<!-- end of dependency versions -->") else { return [:] }
        var rows: [String: (asks: String, tested: String)] = [:]
        for line in page[start.upperBound..<end.lowerBound].split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 3 else { continue }
            rows[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = (cells[1], cells[2])
        }
        return rows
    }

    @Test func everyRequirementOfPackageSwiftIsInTheTable() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let table = try Self.documentedTable()
        let requirement = /\.package\(url: "[^"]*\/([^\/"]+)\.git", from: "([^"]+)"\)/
        var count = 0
        for match in manifest.matches(of: requirement) {
            count += 1
            let name = String(match.output.1), from = String(match.output.2)
            #expect(table[name]?.asks == "`from: \(from)`", "docs/requirements.md's Dependencies table: \(name) should say `from: \(from)`")
        }
        #expect(count > 10, "no .package(url:from:) lines found in Package.swift")
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: TestEnvironment.repositoryRoot.appendingPathComponent("Package.resolved").path),
                   "Package.resolved is written by swift build"))
    func theTableNamesTheResolvedVersions() throws {
        struct Resolved: Decodable {
            struct Pin: Decodable {
                struct State: Decodable { let version: String? }
                let identity: String
                let state: State
            }
            let pins: [Pin]
        }
        let resolved = try JSONDecoder().decode(Resolved.self, from: Data(contentsOf: Self.root.appendingPathComponent("Package.resolved")))
        let table = try Self.documentedTable()
        for pin in resolved.pins {
            #expect(table[pin.identity]?.tested == pin.state.version,
                    "docs/requirements.md's Dependencies table: \(pin.identity) resolved to \(pin.state.version ?? "a revision"), the table says \(table[pin.identity]?.tested ?? "nothing")")
        }
        #expect(Set(table.keys) == Set(resolved.pins.map(\.identity)), "packages in the table but not in the graph, or the other way round")
    }
}
