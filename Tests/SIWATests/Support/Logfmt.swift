/// A logfmt reader for the tests (LogLineHandlerTests), written to the
/// format's grammar and apart from siwa's writer: `key=value` pairs
/// separated by spaces; a key is bare; a value is bare (up to a space) or
/// quoted, with `\"`, `\\`, `\n`, `\r`, `\t` and `\uXXXX` inside quotes.
/// Anything else is an error, so a line the writer got wrong fails.
enum Logfmt {
    struct ParseError: Error, CustomStringConvertible {
        let description: String
    }

    static func parse(_ line: String) throws -> [(key: String, value: String)] {
        var pairs: [(key: String, value: String)] = []
        var characters = Array(line.unicodeScalars)[...]
        while !characters.isEmpty {
            while characters.first == " " { characters.removeFirst() }
            guard !characters.isEmpty else { break }
            var key = ""
            while let next = characters.first, next != "=", next != " ", next != "\"" {
                key.unicodeScalars.append(characters.removeFirst())
            }
            guard !key.isEmpty, characters.first == "=" else { throw ParseError(description: "a key without = at \(String(String.UnicodeScalarView(characters)))") }
            characters.removeFirst()
            var value = ""
            if characters.first == "\"" {
                characters.removeFirst()
                var closed = false
                while let next = characters.popFirst() {
                    if next == "\"" { closed = true; break }
                    guard next == "\\" else {
                        guard next.value >= 0x20, next.value != 0x7f else { throw ParseError(description: "a raw control character in \(key)") }
                        value.unicodeScalars.append(next)
                        continue
                    }
                    switch characters.popFirst() {
                    case "\"": value += "\""
                    case "\\": value += "\\"
                    case "n": value += "\n"
                    case "r": value += "\r"
                    case "t": value += "\t"
                    case "u":
                        let hex = String(String.UnicodeScalarView(characters.prefix(4)))
                        characters.removeFirst(min(4, characters.count))
                        guard hex.count == 4, let code = UInt32(hex, radix: 16), let scalar = Unicode.Scalar(code) else {
                            throw ParseError(description: "a bad \\u escape in \(key)")
                        }
                        value.unicodeScalars.append(scalar)
                    default: throw ParseError(description: "an unknown escape in \(key)")
                    }
                }
                guard closed else { throw ParseError(description: "an unclosed quote in \(key)") }
                guard characters.isEmpty || characters.first == " " else { throw ParseError(description: "text after the quote of \(key)") }
            } else {
                while let next = characters.first, next != " " {
                    guard next != "\"", next != "=" else { throw ParseError(description: "a bare value with \(next) in \(key)") }
                    value.unicodeScalars.append(characters.removeFirst())
                }
            }
            pairs.append((key, value))
        }
        return pairs
    }
}
