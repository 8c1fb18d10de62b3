import AppleSignIn
import AppleSimulator
import Foundation
import Logging
import Testing

/// The hand-written parts of the hot path read and write JSON as a parser would.
@Suite("Body spellings and stored claims", .testDatabases)
struct BodyAndClaimsTests {
    /// Apple's compact body is read without a parser; every other spelling
    /// of the same JSON goes through the parser and is recorded the same way.
    @Test func everySpellingOfTheBodyIsRead() async throws {
        let siwa = try await ServerHarness.start()
        try atTestEnd { await siwa.stop() }
        func token() throws -> String { try siwa.notification("email-enabled", sub: "spell.\(UUID().uuidString)") }
        var spellings: [String] = []
        spellings.append(#"{"payload":"\#(try token())"}"#)
        spellings.append(#"{ "payload" : "\#(try token())" }"#)
        spellings.append("{\"payload\":\"\(try token())\"}\n")
        spellings.append(#"{"other":1,"payload":"\#(try token())"}"#)
        // An escaped first character: the same token once the string is decoded.
        let escaped = try token()
        spellings.append(#"{"payload":"\u00\#(String(escaped.utf8.first!, radix: 16))\#(escaped.dropFirst())"}"#)
        for spelling in spellings {
            let answer = try await siwa.post(body: Data(spelling.utf8))
            #expect(answer.status == 200, "\(spelling.prefix(40))")
            #expect(answer.json["status"] as? String == "recorded")
        }
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.notifications") == spellings.count)
        // Near misses of the compact shape are still judged by the parser.
        for bad in [#"{"payload":""}"#, #"{"payload":"a"b"}"#, #"{"payload":"x.y.z""#, #"{"payload":1}"#] {
            let answer = try await siwa.post(body: Data(bad.utf8))
            #expect(answer.status == 400, "\(bad)")
        }
        #expect(try await siwa.database.scalar("SELECT count(*) FROM siwa.notifications") == spellings.count)
    }

    /// The stored claims parse as JSON and hold exactly the verified values,
    /// awkward characters and optional fields included.
    @Test func storedClaimsAreTheVerifiedClaims() async throws {
        let apple = try AppleSimulator()
        let keys = try AppleKeySet(jwks: apple.jwksJSON, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let verifier = NotificationVerifier(keys: keys, policy: VerificationPolicy(audiences: ["com.example.app"]))
        let issued = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let cases: [(email: String?, isPrivate: Bool?)] = [
            (#"quo"te\back\slash ✉️ "@privaterelay.appleid.com"#, true), (nil, nil), ("plain@example.com", false),
        ]
        for (email, isPrivate) in cases {
            let sub = "001234.\"sub\\\".\(UUID().uuidString)"
            let token = try apple.notification(type: "email-disabled", sub: sub, audience: "com.example.app", jti: "jti-\"1\"",
                                               issuedAt: issued, eventTime: issued, email: email, isPrivateEmail: isPrivate)
            let notification = try await verifier.verify(token)
            let claims = try #require(try JSONSerialization.jsonObject(with: notification.claimsJSON) as? [String: Any])
            #expect(claims["iss"] as? String == "https://appleid.apple.com")
            #expect(claims["aud"] as? String == "com.example.app")
            #expect(claims["jti"] as? String == "jti-\"1\"")
            #expect((claims["iat"] as? NSNumber)?.doubleValue == issued.timeIntervalSince1970)
            #expect((claims["exp"] as? NSNumber)?.doubleValue == notification.expiresAt.timeIntervalSince1970)
            let events = try #require(claims["events"] as? [String: Any])
            #expect(events["type"] as? String == "email-disabled")
            #expect(events["sub"] as? String == sub)
            #expect((events["event_time"] as? NSNumber)?.int64Value == Int64(issued.timeIntervalSince1970 * 1000))
            #expect(events["email"] as? String == email)
            #expect((events["is_private_email"] as? NSNumber)?.boolValue == isPrivate)
            #expect(events.keys.contains("is_private_email") == (isPrivate != nil))
        }
    }

    @Test func numbersKeepTheirValue() {
        #expect(JSONText.number(1_700_000_000) == "1700000000")
        #expect(JSONText.number(1_700_000_000.5) == "1700000000.5")
        #expect(JSONText.number(-3) == "-3")
        #expect(Double(JSONText.number(1e20)) == 1e20)
        #expect(JSONText.number(.nan) == "null")
    }
}
