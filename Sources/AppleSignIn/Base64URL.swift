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
        var text = text
        return text.withUTF8 { decode(bytes: $0) }
    }

    public static func decode(_ text: String) -> Data? { decode(text[...]) }

    static func decode(bytes: UnsafeBufferPointer<UInt8>) -> Data? {
        guard bytes.count % 4 != 1 else { return nil }
        let outputCount = bytes.count * 3 / 4
        var output = [UInt8](repeating: 0, count: outputCount)
        let valid = table.withUnsafeBufferPointer { table in
            output.withUnsafeMutableBufferPointer { out -> Bool in
                var accumulator: UInt32 = 0
                var bits: UInt32 = 0
                var written = 0
                for byte in bytes {
                    let value = table[Int(byte)]
                    guard value != 0xFF else { return false }
                    accumulator = (accumulator << 6) | UInt32(value)
                    bits += 6
                    if bits >= 8 {
                        bits -= 8
                        out[written] = UInt8(truncatingIfNeeded: accumulator >> bits)
                        written += 1
                        accumulator &= (1 << bits) - 1
                    }
                }
                // Leftover bits must be zero (canonical encoding).
                return accumulator == 0 && written == outputCount
            }
        }
        return valid ? Data(output) : nil
    }

    public static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
