/// Bytes as lower-case hex, two digits a byte from a table: what siwa
/// writes for hashes, checksums and codes. (String(format: "%02x") goes
/// through Foundation's formatter for each byte, and sign-in hashes a nonce
/// on every request.)
extension Sequence<UInt8> {
    public var hexLowercased: String {
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: hex, as: UTF8.self)
    }
}
