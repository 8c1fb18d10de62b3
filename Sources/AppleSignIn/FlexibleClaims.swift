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
        } else if let text = try? container.decode(String.self), let bool = Self.value(of: text) {
            value = bool
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected true/false as a boolean or a string")
        }
    }

    /// `true` or `false` as a string, in any case (Apple sends both kinds).
    static func value(of text: String) -> Bool? { Bool(text.lowercased()) }
}

/// `aud` is a string, or (by RFC 7519) an array of strings.
struct AudienceClaim: Decodable, Sendable {
    let values: [String]

    init(values: [String]) { self.values = values }
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

extension RegisteredClaims {
    /// As the synthesized `init(from:)` decodes them, from claims of plain
    /// members; nil where a member's type would make it throw, or `events`
    /// is not a string (JSONDecoder then decides).
    init?(plain object: PlainJSONObject) {
        guard case let iss? = object.optionalString("iss"), case let aud? = object.optionalString("aud"),
              case let exp? = object.optionalNumber("exp"), case let iat? = object.optionalNumber("iat"),
              case let sub? = object.optionalString("sub"), case let jti? = object.optionalString("jti"),
              case let events? = object.optionalString("events")
        else { return nil }
        self.init(iss: iss, aud: aud.map { AudienceClaim(values: [$0]) }, exp: exp, iat: iat, sub: sub, jti: jti,
                  events: events.map(EventsClaim.text))
    }
}
