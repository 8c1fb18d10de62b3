import Foundation

/// Apple sends some booleans as the strings "true"/"false" (until late 2023)
/// and as JSON booleans since; accept both, refuse anything else.
public struct FlexibleBool: Decodable, Sendable, Equatable {
    public let value: Bool
    public init(_ value: Bool) { self.value = value }
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let bool = try? container.decode(Bool.self) {
            value = bool
        } else if let text = try? container.decode(String.self), let bool = Bool(text.lowercased()) {
            value = bool
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected true/false as a boolean or a string")
        }
    }
}

/// `aud` is a string, or (by RFC 7519) an array of strings.
struct AudienceClaim: Decodable, Sendable {
    let values: [String]
    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let one = try? container.decode(String.self) {
            values = [one]
        } else {
            values = try container.decode([String].self)
        }
    }
}

/// The registered claims every Apple token carries, checked the same way for
/// notifications and identity tokens.
struct RegisteredClaims: Decodable, Sendable {
    let iss: String?
    let aud: AudienceClaim?
    let exp: Double?
    let iat: Double?
    let sub: String?
    let jti: String?
    /// A notification's `events`, taken in the same pass over the payload;
    /// judged only after the registered claims (see `EventsClaim`).
    let events: EventsClaim?
}
