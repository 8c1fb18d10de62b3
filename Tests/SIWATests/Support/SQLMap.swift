import Foundation

/// sql/README.md, the schema's map, against a migrated database's catalog
/// and against the migrations' text: what is missing from the map, what it
/// names that does not exist, and which migrations each line should name.
/// Every problem is one line saying what to write (SQLMapTests).
struct SQLMap {
    enum Kind: String, CaseIterable, Sendable {
        case table, view, function, trigger, policy

        /// The map's heading for this kind.
        var heading: String {
            switch self {
            case .table: "## Tables"
            case .view: "## Views"
            case .function: "## Functions"
            case .trigger: "## Triggers"
            case .policy: "## Row-level security policies"
            }
        }
        /// Triggers and policies belong to a table (`name on table`).
        var hasTable: Bool { self == .trigger || self == .policy }
    }

    /// One line of the map.
    struct Entry: Sendable {
        /// `name`, `name(types)` (an overloaded function), or `name on table`.
        let key: String
        let lastDefinedIn: [Migration]
        let earlier: [Migration]
    }

    /// A migration as a line names it: `[019](019_serve_writes.sql)`.
    struct Migration: Equatable, Sendable, CustomStringConvertible {
        let number: Int
        let file: String
        var description: String { "[\(String(format: "%03d", number))](\(file))" }
    }

    let entries: [Kind: [Entry]]

    /// Reads the map's five tables.
    init(markdown: String) {
        var entries: [Kind: [Entry]] = [:]
        var kind: Kind?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## ") {
                kind = Kind.allCases.first { $0.heading == line.trimmingCharacters(in: .whitespaces) }
                continue
            }
            guard let kind, line.hasPrefix("| `") else { continue }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= (kind.hasTable ? 5 : 4) else { continue }
            let name = cells[0].replacingOccurrences(of: "`", with: "")
            let key = kind.hasTable ? "\(name) on \(cells[1].replacingOccurrences(of: "`", with: ""))" : name
            entries[kind, default: []].append(Entry(key: key, lastDefinedIn: Self.migrations(in: cells[cells.count - 2]),
                                                    earlier: Self.migrations(in: cells[cells.count - 1])))
        }
        self.entries = entries
    }

    static func migrations(in cell: String) -> [Migration] {
        matches(of: #"\[(\d+)\]\(([^)]*)\)"#, in: cell).compactMap { groups in
            Int(groups[1]).map { Migration(number: $0, file: groups[2]) }
        }
    }

    /// The problems, each a line saying what to write. `catalog`: the keys a
    /// migrated database has, per kind; `files`: the migrations' names and texts.
    func problems(catalog: [Kind: Set<String>], files: [(name: String, text: String)]) -> [String] {
        let definitions = SQLDefinitions(files: files)
        var problems: [String] = []
        for kind in Kind.allCases {
            let lines = entries[kind] ?? []
            let present = catalog[kind] ?? []
            var seen = Set<String>()
            for entry in lines where !seen.insert(entry.key).inserted {
                problems.append("\(kind.heading): `\(entry.key)` has two lines: keep one")
            }
            for key in present.sorted() where !lines.contains(where: { Self.entry($0.key, covers: key) }) {
                let (last, earlier) = definitions.expected(kind, key: key)
                problems.append("\(kind.heading): `\(key)` is missing: add \(Self.line(kind, key: key, last: last, earlier: earlier))")
            }
            for entry in lines where !present.contains(where: { Self.entry(entry.key, covers: $0) }) {
                problems.append("\(kind.heading): `\(entry.key)` is not in a migrated database: remove its line (or correct its name)")
            }
            for entry in lines {
                let (last, earlier) = definitions.expected(kind, key: entry.key)
                guard entry.lastDefinedIn != (last.map { [$0] } ?? []) || entry.earlier != earlier else { continue }
                let source = last == nil ? "no migration creates, replaces or alters it" : "the migrations say so"
                problems.append("\(kind.heading): `\(entry.key)` says last defined in \(Self.list(entry.lastDefinedIn)), "
                    + "earlier \(Self.list(entry.earlier)); \(source): \(Self.line(kind, key: entry.key, last: last, earlier: earlier))")
            }
        }
        return problems
    }

    /// Whether the line `mapKey` is about the object `key`: the same, or a
    /// pattern (`serve_writes_<role> on jobs`: policies made per role).
    static func entry(_ mapKey: String, covers key: String) -> Bool {
        guard mapKey.contains("<") else { return mapKey == key }
        let pattern = mapKey.split(separator: "<", omittingEmptySubsequences: false).enumerated().map { index, part in
            index == 0 ? NSRegularExpression.escapedPattern(for: String(part))
                : ".+" + NSRegularExpression.escapedPattern(for: String(part.drop { $0 != ">" }.dropFirst()))
        }.joined()
        return !matches(of: "^\(pattern)$", in: key).isEmpty
    }

    /// The line to write (the description left to the writer).
    static func line(_ kind: Kind, key: String, last: Migration?, earlier: [Migration]) -> String {
        let parts = key.components(separatedBy: " on ")
        let names = kind.hasTable && parts.count == 2 ? "`\(parts[0])` | `\(parts[1])`" : "`\(key)`"
        return "| \(names) | (what it is) | \(last.map(\.description) ?? "(who makes it)") | \(list(earlier, empty: "")) |"
    }

    static func list(_ migrations: [Migration], empty: String = "nothing") -> String {
        migrations.isEmpty ? empty : migrations.map(\.description).joined(separator: ", ")
    }

    /// Each match's groups (0: the whole match; a group that did not take part: "").
    static func matches(of pattern: String, in text: String, options: NSRegularExpression.Options = []) -> [[String]] {
        guard let regex = try? NSRegularExpression(pattern: pattern, options: options) else { return [] }
        let ns = text as NSString
        return regex.matches(in: text, range: NSRange(location: 0, length: ns.length)).map { match in
            (0..<match.numberOfRanges).map { index in
                let range = match.range(at: index)
                return range.location == NSNotFound ? "" : ns.substring(with: range)
            }
        }
    }
}
