import Foundation

/// The event types Apple sends. The deletion event is `account-delete` in
/// Apple's older documentation and `account-deleted` in the current one.
public enum AppleEventType: String, Sendable, CaseIterable, Codable {
    case emailDisabled = "email-disabled"
    case emailEnabled = "email-enabled"
    case consentRevoked = "consent-revoked"
    case accountDelete = "account-delete"
    case accountDeleted = "account-deleted"
}

/// The decoded `events` claim of a notification.
public struct AppleEvent: Sendable, Equatable, Codable {
    /// As Apple sent it; may be a type this version does not know.
    public let type: String
    public let sub: String
    /// Milliseconds since the epoch.
    public let eventTime: Int64
    public let email: String?
    public let isPrivateEmail: Bool?

    public var knownType: AppleEventType? { AppleEventType(rawValue: type) }

    public init(type: String, sub: String, eventTime: Int64, email: String? = nil, isPrivateEmail: Bool? = nil) {
        self.type = type
        self.sub = sub
        self.eventTime = eventTime
        self.email = email
        self.isPrivateEmail = isPrivateEmail
    }

    enum CodingKeys: String, CodingKey {
        case type, sub, email
        case eventTime = "event_time"
        case isPrivateEmail = "is_private_email"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        type = try c.decode(String.self, forKey: .type)
        sub = try c.decode(String.self, forKey: .sub)
        // Apple sends an integer; tolerate a float spelling of the same number.
        if let ms = try? c.decode(Int64.self, forKey: .eventTime) {
            eventTime = ms
        } else {
            let ms = try c.decode(Double.self, forKey: .eventTime)
            guard ms.isFinite, abs(ms) < 1e15 else {
                throw DecodingError.dataCorruptedError(forKey: .eventTime, in: c, debugDescription: "out of range")
            }
            eventTime = Int64(ms)
        }
        email = try c.decodeIfPresent(String.self, forKey: .email)
        isPrivateEmail = try c.decodeIfPresent(FlexibleBool.self, forKey: .isPrivateEmail)?.value
        guard !type.isEmpty else { throw DecodingError.dataCorruptedError(forKey: .type, in: c, debugDescription: "empty") }
        guard !sub.isEmpty, sub.utf8.count <= 255 else {
            throw DecodingError.dataCorruptedError(forKey: .sub, in: c, debugDescription: "empty or too long")
        }
    }
}

extension AppleEvent {
    /// As `init(from:)` decodes it, from events of plain members; nil where
    /// that would throw, or read a float (JSONDecoder then decides).
    init?(plain object: PlainJSONObject) {
        guard case .string(let type)? = object["type"], !type.isEmpty,
              case .string(let sub)? = object["sub"], !sub.isEmpty, sub.utf8.count <= 255,
              case .integer(let eventTime)? = object["event_time"],
              case let email? = object.optionalString("email")
        else { return nil }
        let isPrivateEmail: Bool?
        switch object["is_private_email"] {
        case nil, .null?: isPrivateEmail = nil
        case .bool(let value)?: isPrivateEmail = value
        case .string(let text)?:
            guard let value = Bool(text.lowercased()) else { return nil }
            isPrivateEmail = value
        case .integer?: return nil
        }
        self.init(type: type, sub: sub, eventTime: eventTime, email: email, isPrivateEmail: isPrivateEmail)
    }
}

/// A server-to-server notification whose signature and claims were verified.
public struct AppleNotification: Sendable {
    public let jti: String
    public let audience: String
    public let issuedAt: Date
    public let expiresAt: Date
    public let event: AppleEvent
    /// `iat` and `exp` as the token wrote them (JSON numbers).
    let issuedAtClaim: Double
    let expiresAtClaim: Double

    /// The verified claims as JSON, `events` decoded into an object.
    public var claimsJSON: Data {
        NotificationVerifier.storedClaims(audience: audience, issuedAt: issuedAtClaim, expiresAt: expiresAtClaim, jti: jti, event: event)
    }

    /// What the inbox keeps in `siwa.notifications.claims`: the verified
    /// claims its columns do not hold (`exp`, and an email event's address
    /// and relay flag), `{"exp":…,"events":{"email":…,"is_private_email":…}}`.
    /// The rest is in the row already (`jti`, `audience`, `issued_at`,
    /// `event_type`, `apple_sub`, `event_time`; `iss` is always Apple's):
    /// every notification is written to the log once more, so each byte
    /// kept twice is paid twice.
    public var inboxClaimsJSON: String {
        var json: [UInt8] = []
        json.reserveCapacity(128)
        json.append(contentsOf: "{\"exp\":\(JSONText.number(expiresAtClaim))".utf8)
        if event.email != nil || event.isPrivateEmail != nil {
            json.append(contentsOf: #","events":{"#.utf8)
            if let email = event.email {
                json.append(contentsOf: #""email":"#.utf8)
                JSONText.appendQuoted(email, to: &json)
            }
            if let isPrivate = event.isPrivateEmail {
                json.append(contentsOf: ((event.email == nil ? "" : ",") + "\"is_private_email\":\(isPrivate)").utf8)
            }
            json.append(UInt8(ascii: "}"))
        }
        json.append(UInt8(ascii: "}"))
        return String(decoding: json, as: UTF8.self)
    }
}

/// Verifies Apple's signed server-to-server notifications.
public struct NotificationVerifier: Sendable {
    let base: AppleTokenVerifier

    public init(keys: AppleKeySet, policy: VerificationPolicy) {
        base = AppleTokenVerifier(keys: keys, policy: policy)
    }

    /// Throws `VerificationFailure` (the sender's fault) or
    /// `AppleKeysUnavailable` (ours: try again later).
    public func verify(_ token: String) async throws -> AppleNotification {
        let verified = try await base.verify(token)
        guard let jti = verified.claims.jti, !jti.isEmpty else { throw VerificationFailure.missingJTI }
        guard jti.utf8.count <= 255 else { throw VerificationFailure.malformedClaims("jti is too long") }

        // `events` is a JSON string that must be parsed a second time (that is
        // what Apple sends); accept an object too.
        let event: AppleEvent
        switch verified.claims.events ?? .missing {
        case .missing: throw VerificationFailure.malformedEvents("events is missing")
        case .invalid(let reason): throw VerificationFailure.malformedEvents(reason)
        case .object(let object): event = object
        case .text(let text):
            if let plain = PlainJSONObject(text).flatMap(AppleEvent.init(plain:)) {
                event = plain
            } else {
                do { event = try JSONDecoder().decode(AppleEvent.self, from: Data(text.utf8)) } catch {
                    throw VerificationFailure.malformedEvents(AppleTokenVerifier.describe(error))
                }
            }
        }
        // event_time (ms) is stored and compared as a bigint; keep it a sane
        // time so no genuine-but-absurd value can pin a user's state forever:
        // not before 2019, not after the notification expires.
        // (Compared as Double: the bounds need no conversion that could trap.)
        let eventTime = Double(event.eventTime)
        let earliest = VerificationPolicy.earliestIssuedAt * 1000
        let latest = (verified.expiresAt.timeIntervalSince1970 + base.policy.leeway) * 1000
        guard eventTime >= earliest, eventTime <= latest else {
            throw VerificationFailure.malformedEvents("event_time is out of range")
        }
        return AppleNotification(
            jti: jti, audience: verified.audience, issuedAt: verified.issuedAt, expiresAt: verified.expiresAt, event: event,
            issuedAtClaim: verified.claims.iat ?? 0, expiresAtClaim: verified.claims.exp ?? 0
        )
    }
}

/// The `events` claim: a JSON string (as Apple sends it) or an object.
/// Decoding never fails: a bad value becomes `.invalid`, so it is reported as
/// malformed events, after the registered claims were checked.
enum EventsClaim: Decodable, Sendable {
    case missing
    case text(String)
    case object(AppleEvent)
    case invalid(String)

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .missing
        } else if let text = try? container.decode(String.self) {
            self = .text(text)
        } else {
            do {
                self = .object(try container.decode(AppleEvent.self))
            } catch DecodingError.typeMismatch(_, let context) where context.codingPath.count <= 1 {
                self = .invalid("events is neither a JSON string nor an object")
            } catch {
                self = .invalid(AppleTokenVerifier.describe(error))
            }
        }
    }
}

extension NotificationVerifier {
    /// The verified claims as siwa stores them, `events` decoded into an
    /// object. Built by hand: JSONEncoder cost 4% of a notification's CPU.
    static func storedClaims(audience: String, issuedAt: Double, expiresAt: Double, jti: String, event: AppleEvent) -> Data {
        var json: [UInt8] = []
        json.reserveCapacity(384)
        func field(_ name: String, _ value: String) {
            json.append(contentsOf: ",\"\(name)\":".utf8)
            JSONText.appendQuoted(value, to: &json)
        }
        json.append(contentsOf: #"{"iss":"#.utf8)
        JSONText.appendQuoted(VerificationPolicy.appleIssuer, to: &json)
        field("aud", audience)
        json.append(contentsOf: ",\"iat\":\(JSONText.number(issuedAt)),\"exp\":\(JSONText.number(expiresAt))".utf8)
        field("jti", jti)
        json.append(contentsOf: #","events":{"type":"#.utf8)
        JSONText.appendQuoted(event.type, to: &json)
        field("sub", event.sub)
        json.append(contentsOf: ",\"event_time\":\(event.eventTime)".utf8)
        if let email = event.email { field("email", email) }
        if let isPrivate = event.isPrivateEmail { json.append(contentsOf: ",\"is_private_email\":\(isPrivate)".utf8) }
        json.append(contentsOf: "}}".utf8)
        return Data(json)
    }
}
