import Foundation

/// Splits a SQL file into statements the way psql does: on `;` outside
/// quotes, dollar-quoted bodies and comments. Needed because PostgreSQL's
/// extended query protocol (the one postgres-nio speaks) takes one statement
/// at a time.
public enum SQLScript {
    public static func statements(_ sql: String) -> [String] {
        let chars = Array(sql.unicodeScalars)
        var statements: [String] = []
        var current = String.UnicodeScalarView()
        var i = 0
        func flush() {
            let text = String(current).trimmingCharacters(in: .whitespacesAndNewlines)
            if !text.isEmpty, !isOnlyComments(text) { statements.append(text) }
            current = String.UnicodeScalarView()
        }
        while i < chars.count {
            let c = chars[i]
            let next: Unicode.Scalar? = i + 1 < chars.count ? chars[i + 1] : nil
            if c == "-", next == "-" {  // line comment
                while i < chars.count, chars[i] != "\n" { current.append(chars[i]); i += 1 }
                continue
            }
            if c == "/", next == "*" {  // block comment
                current.append(c); current.append("*"); i += 2
                while i < chars.count, !(chars[i] == "*" && i + 1 < chars.count && chars[i + 1] == "/") {
                    current.append(chars[i]); i += 1
                }
                if i < chars.count { current.append("*"); current.append("/"); i += 2 }
                continue
            }
            if c == "'" || c == "\"" {  // quoted literal or identifier ('' escapes itself)
                current.append(c); i += 1
                while i < chars.count {
                    current.append(chars[i])
                    if chars[i] == c { i += 1; break }
                    i += 1
                }
                continue
            }
            if c == "$", let tag = dollarTag(chars, at: i) {  // $tag$ ... $tag$
                for s in tag { current.append(s) }
                i += tag.count
                while i < chars.count {
                    if chars[i] == "$", Array(chars[i..<min(chars.count, i + tag.count)]) == tag {
                        for s in tag { current.append(s) }
                        i += tag.count
                        break
                    }
                    current.append(chars[i]); i += 1
                }
                continue
            }
            if c == ";" { flush(); i += 1; continue }
            current.append(c); i += 1
        }
        flush()
        return statements
    }

    /// `$$` or `$name$` starting at `i`, else nil (a `$1` parameter is not a tag).
    private static func dollarTag(_ chars: [Unicode.Scalar], at i: Int) -> [Unicode.Scalar]? {
        var j = i + 1
        while j < chars.count, chars[j] == "_" || chars[j].properties.isAlphabetic || (j > i + 1 && ("0"..."9").contains(chars[j])) {
            j += 1
        }
        guard j < chars.count, chars[j] == "$" else { return nil }
        return Array(chars[i...j])
    }

    private static func isOnlyComments(_ text: String) -> Bool {
        text.split(separator: "\n").allSatisfy { $0.trimmingCharacters(in: .whitespaces).hasPrefix("--") || $0.trimmingCharacters(in: .whitespaces).isEmpty }
    }
}
