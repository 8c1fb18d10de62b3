import Foundation

/// A purge-plan statement read the way PostgreSQL's lexer reads it, so that
/// neither quotes nor comments can fool the plan's checks in either
/// direction: a `;` or `$3` inside a string literal, a quoted name or a
/// comment is not code, and a second statement after a comment, or after a
/// quote that only looks like one, is.
///
/// It follows PostgreSQL's scanner (scan.l) where that matters here:
/// `'...'` with `''` (backslashes are plain characters: siwa runs each step
/// with `standard_conforming_strings` on), `E'...'` with backslash escapes,
/// `"..."` with `""`, `--` comments to the end of the line, nested `/* */`
/// comments, `$n` parameters, identifiers that may hold `$` after their
/// first character, and `$tag$...$tag$` dollar quotes (refused: a plan
/// statement has no need for code blocks, and they hide text from every
/// check).
struct PlanStatement {
    enum Token: Equatable {
        /// An unquoted identifier or keyword, upper-cased.
        case word(String)
        /// `$n`.
        case parameter(Int)
        case semicolon
        /// Anything else that is code (operators, numbers, punctuation, quoted text).
        case other
    }

    enum Problem: Error, Equatable {
        case unterminated(String)
        case dollarQuote
    }

    /// The code tokens, without whitespace and comments.
    private(set) var tokens: [Token] = []
    /// Byte offsets (UTF-8) of each token's start, parallel to `tokens`.
    private(set) var offsets: [Int] = []

    init(_ text: String) throws(Problem) {
        let bytes = Array(text.utf8)
        var index = 0
        func at(_ position: Int) -> UInt8? { position < bytes.count ? bytes[position] : nil }
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), 0x0B, 0x0C:
                index += 1
            case UInt8(ascii: "-") where at(index + 1) == UInt8(ascii: "-"):
                while index < bytes.count, bytes[index] != UInt8(ascii: "\n"), bytes[index] != UInt8(ascii: "\r") { index += 1 }
            case UInt8(ascii: "/") where at(index + 1) == UInt8(ascii: "*"):
                var depth = 0
                repeat {
                    if at(index) == UInt8(ascii: "/"), at(index + 1) == UInt8(ascii: "*") {
                        depth += 1
                        index += 2
                    } else if at(index) == UInt8(ascii: "*"), at(index + 1) == UInt8(ascii: "/") {
                        depth -= 1
                        index += 2
                    } else {
                        index += 1
                    }
                } while depth > 0 && index < bytes.count
                guard depth == 0 else { throw .unterminated("/* comment") }
            case UInt8(ascii: "'"):
                append(.other, at: index)
                index = try Self.skipQuoted(bytes, from: index, quote: UInt8(ascii: "'"), backslashEscapes: false)
            case UInt8(ascii: "\""):
                // A quoted name is a word too, for the checks: `SET LOCAL "role"`
                // changes the role as surely as `SET LOCAL ROLE` does.
                let start = index
                index = try Self.skipQuoted(bytes, from: index, quote: UInt8(ascii: "\""), backslashEscapes: false)
                let name = String(decoding: bytes[(start + 1)..<(index - 1)], as: UTF8.self).replacingOccurrences(of: "\"\"", with: "\"")
                append(.word(name.uppercased()), at: start)
            case UInt8(ascii: "$"):
                let start = index
                index += 1
                if let next = at(index), Self.isDigit(next) {
                    var number = 0
                    while let digit = at(index), Self.isDigit(digit) {
                        number = min(number * 10 + Int(digit - UInt8(ascii: "0")), 1_000_000)
                        index += 1
                    }
                    append(.parameter(number), at: start)
                } else if let next = at(index), Self.isIdentifierStart(next) || next == UInt8(ascii: "$") {
                    throw .dollarQuote
                } else {
                    append(.other, at: start)
                }
            case UInt8(ascii: ";"):
                append(.semicolon, at: index)
                index += 1
            default:
                if Self.isIdentifierStart(byte) {
                    let start = index
                    while let next = at(index), Self.isIdentifierPart(next) { index += 1 }
                    let word = String(decoding: bytes[start..<index], as: UTF8.self).uppercased()
                    if word == "E", at(index) == UInt8(ascii: "'") {
                        // E'...': backslash escapes, as PostgreSQL reads them.
                        append(.other, at: start)
                        index = try Self.skipQuoted(bytes, from: index, quote: UInt8(ascii: "'"), backslashEscapes: true)
                    } else {
                        append(.word(word), at: start)
                    }
                } else {
                    append(.other, at: index)
                    index += 1
                }
            }
        }
    }

    private mutating func append(_ token: Token, at offset: Int) {
        tokens.append(token)
        offsets.append(offset)
    }

    /// The index just past the closing quote; a doubled quote is one quote character.
    private static func skipQuoted(_ bytes: [UInt8], from open: Int, quote: UInt8, backslashEscapes: Bool) throws(Problem) -> Int {
        var index = open + 1
        while index < bytes.count {
            let byte = bytes[index]
            if backslashEscapes, byte == UInt8(ascii: "\\") {
                index += 2
            } else if byte == quote {
                if index + 1 < bytes.count, bytes[index + 1] == quote {
                    index += 2
                } else {
                    return index + 1
                }
            } else {
                index += 1
            }
        }
        throw .unterminated(quote == UInt8(ascii: "'") ? "string literal" : "quoted name")
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// PostgreSQL's ident_start: a letter, `_`, or any non-ASCII byte.
    private static func isIdentifierStart(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || byte == UInt8(ascii: "_") || byte >= 0x80
    }

    /// PostgreSQL's ident_cont: also digits and `$`.
    private static func isIdentifierPart(_ byte: UInt8) -> Bool {
        isIdentifierStart(byte) || isDigit(byte) || byte == UInt8(ascii: "$")
    }

    /// The unquoted and quoted names among `tokens`, upper-cased.
    static func words(in tokens: [Token]) -> [String] {
        tokens.compactMap { if case .word(let word) = $0 { word } else { nil } }
    }

    static func highestParameter(in tokens: [Token]) -> Int {
        tokens.reduce(0) { highest, token in
            if case .parameter(let number) = token { max(highest, number) } else { highest }
        }
    }
}
