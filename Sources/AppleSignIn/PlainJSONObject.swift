/// A JSON object whose members are all plain values (strings, integers,
/// booleans, null), read in one pass over its bytes: the shape of a JWS
/// header, of a notification's claims and of its `events`.
///
/// Each token's header, claims and events were three JSONDecoder passes,
/// which cost about as much as the RSA check. This reader takes only what it
/// reads exactly as JSONDecoder would (RFC 8259); for anything else
/// (nested values, fractions and exponents, `\u` escapes, bytes beyond
/// ASCII, a key twice, a malformed document) it answers nil and the caller
/// asks JSONDecoder, which decides, refusals and their reasons included.
struct PlainJSONObject {
    enum Value: Equatable {
        case string(String)
        case integer(Int64)
        case bool(Bool)
        case null
    }

    private(set) var members: [(key: String, value: Value)] = []

    subscript(key: String) -> Value? {
        members.first { $0.key == key }?.value
    }

    /// The object `bytes` spell, or nil (see above).
    init?(_ bytes: UnsafeRawBufferPointer) {
        var reader = Reader(bytes: bytes)
        guard let members = reader.object(), reader.atEnd else { return nil }
        self.members = members
    }

    init?(_ text: String) {
        var text = text
        guard let object = text.withUTF8({ PlainJSONObject(UnsafeRawBufferPointer($0)) }) else { return nil }
        self = object
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        var atEnd: Bool {
            mutating get {
                skipSpace()
                return index == bytes.count
            }
        }

        mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func object() -> [(key: String, value: Value)]? {
            guard take(UInt8(ascii: "{")) else { return nil }
            var members: [(key: String, value: Value)] = []
            members.reserveCapacity(8)
            if take(UInt8(ascii: "}")) { return members }
            repeat {
                skipSpace()
                guard let key = string(), take(UInt8(ascii: ":")), let value = value() else { return nil }
                // A key twice: which one counts is JSONDecoder's to say.
                guard !members.contains(where: { $0.key == key }) else { return nil }
                members.append((key, value))
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")) else { return nil }
            return members
        }

        mutating func value() -> Value? {
            skipSpace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "\""): return string().map(Value.string)
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "n"): return literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return integer().map(Value.integer)
            default: return nil
            }
        }

        mutating func literal(_ word: StaticString, _ value: Value) -> Value? {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count else { return nil }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return nil }
            index += count
            return value
        }

        /// `-?(0|[1-9][0-9]*)`, at most 18 digits (no overflow), and not
        /// followed by a fraction or an exponent.
        mutating func integer() -> Int64? {
            var negative = false
            if bytes[index] == UInt8(ascii: "-") {
                negative = true
                index += 1
            }
            let start = index
            var magnitude: Int64 = 0
            while index < bytes.count, case let byte = bytes[index], byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                // A 19th digit could overflow: such a number is JSONDecoder's.
                guard index - start < 18 else { return nil }
                magnitude = magnitude * 10 + Int64(byte - UInt8(ascii: "0"))
                index += 1
            }
            let digits = index - start
            guard digits > 0, !(digits > 1 && bytes[start] == UInt8(ascii: "0")), !(negative && magnitude == 0) else { return nil }
            if index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
                default: break
                }
            }
            return negative ? -magnitude : magnitude
        }

        /// A string of ASCII characters, with the two-character escapes.
        mutating func string() -> String? {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            index += 1
            let start = index
            var plain = true
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let body = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                    index += 1
                    return plain ? String(decoding: body, as: UTF8.self) : Self.unescaped(body)
                }
                guard byte >= 0x20, byte < 0x80 else { return nil }
                if byte == UInt8(ascii: "\\") {
                    plain = false
                    index += 1  // the escaped character; checked by unescaped
                    guard index < bytes.count else { return nil }
                }
                index += 1
            }
            return nil
        }

        static func unescaped(_ body: UnsafeRawBufferPointer) -> String? {
            var out: [UInt8] = []
            out.reserveCapacity(body.count)
            var index = 0
            while index < body.count {
                let byte = body[index]
                index += 1
                guard byte == UInt8(ascii: "\\") else {
                    out.append(byte)
                    continue
                }
                switch body[index] {
                case UInt8(ascii: "\""): out.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\"))
                case UInt8(ascii: "/"): out.append(UInt8(ascii: "/"))
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                default: return nil  // \u (JSONDecoder's), or not an escape
                }
                index += 1
            }
            return String(decoding: out, as: UTF8.self)
        }
    }
}

extension PlainJSONObject {
    /// A string member: nil (the caller falls back) when present with
    /// another type; `.some(nil)` when absent or null.
    func optionalString(_ key: String) -> String?? {
        switch self[key] {
        case nil, .null?: .some(nil)
        case .string(let text)?: .some(text)
        default: nil
        }
    }

    /// An integer member read as a Double (JSONDecoder reads the same
    /// digits to the same value); nil and `.some(nil)` as above.
    func optionalNumber(_ key: String) -> Double?? {
        switch self[key] {
        case nil, .null?: .some(nil)
        case .integer(let value)?: .some(Double(value))
        default: nil
        }
    }

    /// A boolean member, or its string `true`/`false` in any case (as
    /// `FlexibleBool` reads it); nil and `.some(nil)` as above.
    func optionalFlexibleBool(_ key: String) -> Bool?? {
        switch self[key] {
        case nil, .null?: return .some(nil)
        case .bool(let value)?: return .some(value)
        case .string(let text)?:
            guard let value = FlexibleBool.value(of: text) else { return nil }
            return .some(value)
        default: return nil
        }
    }

    /// An integer member that fits an Int; nil and `.some(nil)` as above.
    func optionalInteger(_ key: String) -> Int?? {
        switch self[key] {
        case nil, .null?: return .some(nil)
        case .integer(let value)?:
            guard let value = Int(exactly: value) else { return nil }
            return .some(value)
        default: return nil
        }
    }
}
