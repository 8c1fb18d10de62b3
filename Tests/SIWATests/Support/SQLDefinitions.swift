import Foundation

/// Which migrations define each object, read from their text: a statement
/// at the start of a line (so not one in a comment or a function's body)
/// that creates, replaces or alters it.
///   tables     CREATE TABLE siwa.NAME, ALTER TABLE siwa.NAME
///   views      CREATE [OR REPLACE] VIEW siwa.NAME, ALTER VIEW siwa.NAME
///   functions  CREATE [OR REPLACE] FUNCTION siwa.NAME(ARGUMENTS)
///   triggers   CREATE TRIGGER NAME ... ON siwa.TABLE
///   policies   CREATE POLICY NAME ON siwa.TABLE
/// A map line that is a pattern (`serve_writes_<role>`: made at run time by
/// a function) is defined by the migrations that mention its fixed part.
struct SQLDefinitions {
    /// Per kind, per key (`name`, `name on table`), the migrations in order.
    private var found: [SQLMap.Kind: [String: [SQLMap.Migration]]] = [:]
    /// Functions by name, each definition with its argument types.
    private var functions: [String: [(migration: SQLMap.Migration, types: String)]] = [:]
    private let files: [(migration: SQLMap.Migration, text: String)]

    private static let statements: [(SQLMap.Kind, String)] = [
        (.table, #"^[ \t]*CREATE[ \t]+(?:UNLOGGED[ \t]+)?TABLE[ \t]+(?:IF[ \t]+NOT[ \t]+EXISTS[ \t]+)?siwa\.(\w+)"#),
        (.table, #"^[ \t]*ALTER[ \t]+TABLE[ \t]+(?:IF[ \t]+EXISTS[ \t]+)?(?:ONLY[ \t]+)?siwa\.(\w+)"#),
        (.view, #"^[ \t]*CREATE[ \t]+(?:OR[ \t]+REPLACE[ \t]+)?(?:MATERIALIZED[ \t]+)?VIEW[ \t]+siwa\.(\w+)"#),
        (.view, #"^[ \t]*ALTER[ \t]+(?:MATERIALIZED[ \t]+)?VIEW[ \t]+siwa\.(\w+)"#),
        (.trigger, #"^[ \t]*CREATE[ \t]+(?:OR[ \t]+REPLACE[ \t]+)?(?:CONSTRAINT[ \t]+)?TRIGGER[ \t]+(\w+)\s[^;]*?\bON\s+siwa\.(\w+)"#),
        (.policy, #"^[ \t]*CREATE[ \t]+POLICY[ \t]+(\w+)\s+ON\s+siwa\.(\w+)"#),
    ]
    private static let function = #"^[ \t]*CREATE[ \t]+(?:OR[ \t]+REPLACE[ \t]+)?FUNCTION[ \t]+siwa\.(\w+)\s*\("#

    init(files: [(name: String, text: String)]) {
        self.files = files.compactMap { file in
            Int(file.name.prefix(while: \.isNumber)).map { (migration: SQLMap.Migration(number: $0, file: file.name), text: file.text) }
        }.sorted { $0.migration.number < $1.migration.number }
        let options: NSRegularExpression.Options = [.caseInsensitive, .anchorsMatchLines]
        for (migration, text) in self.files {
            for (kind, pattern) in Self.statements {
                for groups in SQLMap.matches(of: pattern, in: text, options: options) {
                    let name = groups[1].lowercased()
                    let key = kind.hasTable ? "\(name) on \(groups[2].lowercased())" : name
                    found[kind, default: [:]][key, default: []].append(migration)
                }
            }
            for (name, arguments) in Self.functionDefinitions(in: text, options: options) {
                functions[name, default: []].append((migration, Self.argumentTypes(arguments)))
            }
        }
    }

    /// The last migration that defines `key`, and the ones before it that did.
    func expected(_ kind: SQLMap.Kind, key: String) -> (last: SQLMap.Migration?, earlier: [SQLMap.Migration]) {
        var defining: [SQLMap.Migration]
        if key.contains("<") {
            let fixed = String(key.prefix { $0 != "<" })
            defining = files.filter { $0.text.contains(fixed) }.map(\.migration)
        } else if kind == .function {
            // `name(types)`: an overloaded function, the definitions of that form only.
            let name = String(key.prefix { $0 != "(" })
            let types = key.contains("(") ? String(key.dropFirst(name.count + 1).dropLast()) : nil
            defining = (functions[name] ?? []).filter { types == nil || $0.types == types }.map(\.migration)
        } else {
            defining = found[kind]?[key] ?? []
        }
        var unique: [SQLMap.Migration] = []
        for migration in defining where !unique.contains(migration) { unique.append(migration) }
        guard let last = unique.popLast() else { return (nil, []) }
        return (last, unique)
    }

    /// Each `CREATE [OR REPLACE] FUNCTION siwa.NAME(...)`: its name and the
    /// text between its parentheses.
    private static func functionDefinitions(in text: String, options: NSRegularExpression.Options) -> [(String, String)] {
        guard let regex = try? NSRegularExpression(pattern: function, options: options) else { return [] }
        let ns = text as NSString
        return regex.matches(in: text, range: NSRange(location: 0, length: ns.length)).map { match in
            let name = ns.substring(with: match.range(at: 1)).lowercased()
            let rest = ns.substring(from: match.range.location + match.range.length)
            var depth = 1
            let arguments = rest.prefix { character in
                if character == "(" { depth += 1 } else if character == ")" { depth -= 1 }
                return depth > 0
            }
            return (name, String(arguments))
        }
    }

    /// The input arguments' types as PostgreSQL prints them
    /// (`oidvectortypes`): `runtime name, processes text[]` is `name, text[]`.
    static func argumentTypes(_ arguments: String) -> String {
        var parts: [String] = []
        var depth = 0, quoted = false, current = ""
        for character in arguments {
            if character == "'" { quoted.toggle() }
            if !quoted && character == "(" { depth += 1 }
            if !quoted && character == ")" { depth -= 1 }
            if !quoted && depth == 0 && character == "," { parts.append(current); current = "" } else { current.append(character) }
        }
        parts.append(current)
        return parts.compactMap { part -> String? in
            var argument = part.trimmingCharacters(in: .whitespacesAndNewlines)
            if let range = argument.range(of: #"(?i)\s+DEFAULT\s|\s*="#, options: .regularExpression) {
                argument = String(argument[..<range.lowerBound])
            }
            var words = argument.split(whereSeparator: \.isWhitespace).map { $0.lowercased() }
            if words.first == "out" { return nil }
            if let mode = words.first, ["in", "inout", "variadic"].contains(mode) { words.removeFirst() }
            guard !words.isEmpty else { return nil }
            return canonicalType(words.count > 1 ? words.dropFirst().joined(separator: " ") : words[0])
        }.joined(separator: ", ")
    }

    private static func canonicalType(_ type: String) -> String {
        let array = type.hasSuffix("[]")
        let base = array ? String(type.dropLast(2)) : type
        let aliases = ["int": "integer", "int4": "integer", "int8": "bigint", "int2": "smallint", "bool": "boolean",
                       "timestamptz": "timestamp with time zone", "timestamp": "timestamp without time zone",
                       "varchar": "character varying", "float8": "double precision", "float4": "real", "decimal": "numeric"]
        return (aliases[base] ?? base) + (array ? "[]" : "")
    }
}
