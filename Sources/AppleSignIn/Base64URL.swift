import Foundation

/// base64url without padding (RFC 7515 §2), the encoding of every JWS segment.
/// Decoded by hand over UTF-8 bytes: it runs several times per request, and
/// Foundation's route (rewrite the alphabet, pad, decode) costs more than the
/// RSA check. Anything outside the url-safe alphabet is refused, so a token
/// has exactly one spelling.
public enum Base64URL {
    private static let table: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8.enumerated() {
            table[Int(character)] = UInt8(index)
        }
        return table
    }()

    public static func decode(_ text: Substring) -> Data? {
        var utf8 = text.utf8
        if let decoded = utf8.withContiguousStorageIfAvailable({ decode(bytes: $0) }) { return decoded }
        utf8 = Substring(String(text)).utf8
        return utf8.withContiguousStorageIfAvailable { decode(bytes: $0) } ?? nil
    }

    public static func decode(_ text: String) -> Data? { decode(text[...]) }

    static func decode(bytes: UnsafeBufferPointer<UInt8>) -> Data? {
        guard bytes.count % 4 != 1 else { return nil }
        var output = Data(capacity: bytes.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            let value = table[Int(byte)]
            guard value != 0xFF else { return nil }
            accumulator = (accumulator << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero (canonical encoding).
        guard accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }

    public static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
