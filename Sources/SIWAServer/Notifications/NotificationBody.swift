import AccountLifecycle
import Foundation

/// Apple's request body, `{"payload": "<JWS>"}`: the HTTP layer reads it and
/// hands the token to `NotificationReceiver`.
enum NotificationBody {
    /// The `payload` field, or why the body is refused.
    static func payload(of body: Data) -> Result<String, Rejection> {
        if let token = body.withUnsafeBytes(compactPayload(of:)) { return .success(token) }
        guard body.contains(where: { !($0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09) }) else { return .failure(.emptyBody) }
        guard let decoded = try? JSONDecoder().decode(Parsed.self, from: body) else { return .failure(.malformedBody) }
        guard let payload = decoded.payload, !payload.isEmpty else { return .failure(.missingPayload) }
        return .success(payload)
    }

    /// Apple's body as Apple writes it, `{"payload":"<JWS>"}` with no space
    /// and a token of base64url characters and dots, taken without a JSON
    /// parser (JSONDecoder cost 2% of a notification). Such a string holds
    /// no quote or escape, so this reads it exactly as the parser would;
    /// any other spelling goes to the parser. (Over the raw bytes: Data's
    /// own iterator costs more per byte than the check.)
    static func compactPayload(of body: UnsafeRawBufferPointer) -> String? {
        let prefix = #"{"payload":""#.utf8
        let suffix = #""}"#.utf8
        guard body.count > prefix.count + suffix.count, body.starts(with: prefix), body.suffix(suffix.count).elementsEqual(suffix)
        else { return nil }
        let token = UnsafeRawBufferPointer(rebasing: body[prefix.count..<(body.count - suffix.count)])
        let isTokenByte: (UInt8) -> Bool = { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "="): true
            default: false
            }
        }
        guard token.allSatisfy(isTokenByte) else { return nil }
        return String(decoding: token, as: UTF8.self)
    }

    /// A JSON object whose `payload` is missing or not a string decodes
    /// with `payload == nil`.
    struct Parsed: Decodable {
        let payload: String?
        enum CodingKeys: String, CodingKey { case payload }
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            payload = try? container.decode(String.self, forKey: .payload)
        }
    }
}
