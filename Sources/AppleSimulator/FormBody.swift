import Foundation

/// An `application/x-www-form-urlencoded` body as Apple's token endpoints
/// read it: `+` is a space, `%XX` a byte, the bytes UTF-8. Stricter than a
/// browser: a broken `%` escape, bytes that are not UTF-8, or a field given
/// twice make the body unreadable (RFC 6749 §3.2: no parameter twice), so a
/// client's encoding bug shows up as `invalid_request`. (The simulator's own
/// code, not siwa's: it checks siwa's encoder.)
enum FormBody {
    static func parse(_ body: Data) -> [String: String]? {
        var fields: [String: String] = [:]
        guard let text = String(data: body, encoding: .utf8) else { return nil }
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decode(parts[0]), let value = decode(parts.count > 1 ? parts[1] : ""),
                  fields[name] == nil else { return nil }
            fields[name] = value
        }
        return fields
    }

    static func decode(_ component: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = component.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(high << 4 | low)
            default: bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
