import Foundation

/// base64url without padding (RFC 7515 §2), the encoding of every JWS segment.
public enum Base64URL {
    public static func decode(_ text: Substring) -> Data? {
        // Refuse anything outside the url-safe alphabet: Foundation's decoder
        // would otherwise accept `+`, `/` and padding, and a token must have
        // exactly one spelling.
        var base64 = ""
        base64.reserveCapacity(text.utf8.count + 3)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "A"..."Z", "a"..."z", "0"..."9": base64.unicodeScalars.append(scalar)
            case "-": base64.append("+")
            case "_": base64.append("/")
            default: return nil
            }
        }
        switch base64.utf8.count % 4 {
        case 0: break
        case 2: base64.append("==")
        case 3: base64.append("=")
        default: return nil
        }
        return Data(base64Encoded: base64)
    }

    public static func decode(_ text: String) -> Data? { decode(text[...]) }

    public static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
