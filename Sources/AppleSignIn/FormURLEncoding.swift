/// `application/x-www-form-urlencoded`, the body Apple's token endpoints
/// take, serialized as the WHATWG URL standard does: alphanumerics and
/// `*-._` as they are, a space as `+`, every other UTF-8 byte as `%XX`.
/// (Foundation's query encoding leaves `+`, `&` and `=` alone, which would
/// corrupt a secret or a code holding one.)
public enum FormURLEncoding {
    public static func encode(_ fields: [(String, String)]) -> String {
        fields.map { encode(component: $0.0) + "=" + encode(component: $0.1) }.joined(separator: "&")
    }

    static func encode(component: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(component.utf8.count)
        for byte in component.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "*"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
                out.append(byte)
            case UInt8(ascii: " "):
                out.append(UInt8(ascii: "+"))
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
