import AppleSignIn
import AppleSimulator
import Foundation
import Logging
import Testing

/// A token's header, claims and events, and Apple's token answer, are read
/// without JSONDecoder when they are objects of plain members
/// (PlainJSONObject), and by JSONDecoder otherwise. Each document here is verified twice: as written, and with a
/// member JSONDecoder alone reads (`"zz":[0]`, an array); both must come out
/// the same, to the value or to the refusal's words.
@Suite("Plain JSON reading")
struct PlainJSONTests {
    let apple: AppleSimulator
    let verifier: NotificationVerifier

    init() throws {
        let apple = try AppleSimulator()
        let keys = try AppleKeySet(jwks: apple.jwksJSON, logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }))
        let now = Date(timeIntervalSince1970: 1_764_100_000)
        self.apple = apple
        verifier = NotificationVerifier(keys: keys, policy: VerificationPolicy(audiences: ["com.example.app"], now: { now }))
    }

    /// The outcome of verifying a token of these raw parts, in words.
    func outcome(header: String, claims: String) async -> String {
        let input = Base64URLEncoding.encode(Data(header.utf8)) + "." + Base64URLEncoding.encode(Data(claims.utf8))
        guard let signature = try? apple.currentKey.sign(Data(input.utf8)) else { return "cannot sign" }
        do {
            let n = try await verifier.verify(input + "." + Base64URLEncoding.encode(signature))
            return "ok \(n.jti) \(n.audience) \(n.issuedAt.timeIntervalSince1970) \(n.expiresAt.timeIntervalSince1970) "
                + "\(n.event) \(String(decoding: n.claimsJSON, as: UTF8.self)) \(n.inboxClaimsJSON)"
        } catch let failure as VerificationFailure {
            return "refused \(failure.reason): \(failure.detail)"
        } catch {
            return "error \(error)"
        }
    }

    /// `object` with a member only JSONDecoder reads (nil: not an object).
    static func forcingTheDecoder(_ object: String) -> String? {
        guard let close = object.lastIndex(of: "}") else { return nil }
        let inside = object[..<close].trimmingCharacters(in: .whitespaces)
        let separator = inside.hasSuffix("{") ? "" : ","
        let after = String(object[close...].dropFirst())
        return inside + separator + #""zz":[0]}"# + after
    }

    var header: String { #"{"alg":"RS256","kid":"\#(apple.currentKey.kid)"}"# }

    static func events(_ inside: String) -> String {
        // As a JSON string member: quotes and backslashes escaped.
        "\"" + inside.replacingOccurrences(of: "\\", with: #"\\"#).replacingOccurrences(of: "\"", with: #"\""#) + "\""
    }

    static let event = #"{"type":"email-enabled","sub":"001.abc","event_time":1764100000000,"email":"a@privaterelay.appleid.com"}"#

    static func claims(events: String = PlainJSONTests.events(event), extra: String = "") -> String {
        #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":1764100000,"exp":1764186400,"jti":"j1","events":"#
            + events + extra + "}"
    }

    @Test func claimsReadTheSameEitherWay() async throws {
        let documents = [
            Self.claims(),
            // Spacing, escapes JSON allows, members in another order.
            #" { "jti" : "j\/1\t" , "aud":"com.example.app", "iss":"https:\/\/appleid.apple.com","iat":1764100000,"exp":1764186400,"#
                + #""events":"# + Self.events(Self.event) + " }\n",
            Self.claims(extra: #","nonce":null,"x":true,"n":-12"#),
            // Wrong types, missing and null members, numbers JSON writes otherwise.
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":"1764100000","exp":1764186400,"jti":"j1"}"#,
            #"{"iss":1,"aud":"com.example.app","iat":1764100000,"exp":1764186400,"jti":"j1","events":"{}"}"#,
            #"{"iss":"https://appleid.apple.com","aud":null,"iat":1764100000,"exp":1764186400,"jti":"j1"}"#,
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":1764100000.0,"exp":1.7641864e9,"jti":"j1","events":null}"#,
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":01764100000,"exp":1764186400,"jti":"j1"}"#,
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":-0,"exp":1764186400,"jti":"j1"}"#,
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":1764100000,"exp":1764186400,"jti":"\u006a1","events":"#
                + Self.events(Self.event) + "}",
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":1764100000,"exp":1764186400,"jti":"j1","jti":"j2"}"#,
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":1764100000,"exp":1764186400,"jti" "j1"}"#,
            // Numbers past what an Int64 holds, and at its edge.
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":123456789012345678901234,"exp":1764186400,"jti":"j1"}"#,
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":9223372036854775808,"exp":-999999999999999999,"jti":"j1"}"#,
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":1764100000,"exp":999999999999999999,"jti":"j1"}"#,
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":1764100000,"exp":1764186400,"jti":"j1"} x"#,
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":1764100000,"exp":1764186400,"jti":"j\1"}"#,
            #"{"iss":"https://appleid.apple.com","aud":"com.example.app","iat":1764100000,"exp":1764186400,"jti":"é","events":"#
                + Self.events(Self.event) + "}",
            Self.claims(events: "1"), Self.claims(events: "true"),
        ]
        for document in documents {
            let forced = try #require(Self.forcingTheDecoder(document))
            let plain = await outcome(header: header, claims: document)
            #expect(plain == (await outcome(header: header, claims: forced)), "\(document)")
        }
        // The first is a notification, and the spelling changed nothing.
        #expect(await outcome(header: header, claims: documents[0]).hasPrefix("ok j1 com.example.app"))
        #expect(await outcome(header: header, claims: documents[1]).hasPrefix("ok j/1\t com.example.app"))
    }

    @Test func eventsReadTheSameEitherWay() async throws {
        let events = [
            Self.event,
            #"{"type":"email-disabled","sub":"001.\"q\"\\b","event_time":1764100000000,"is_private_email":"TRUE"}"#,
            #"{"type":"email-disabled","sub":"001.a","event_time":1764100000000,"is_private_email":false,"email":null}"#,
            #"{"type":"consent-revoked","sub":"001.a","event_time":1764100000000.0}"#,
            #"{"type":"consent-revoked","sub":"001.a","event_time":"1764100000000"}"#,
            #"{"type":"","sub":"001.a","event_time":1764100000000}"#,
            #"{"type":"account-delete","sub":"","event_time":1764100000000}"#,
            #"{"type":"account-delete","event_time":1764100000000}"#,
            #"{"type":"email-enabled","sub":"001.a","event_time":1764100000000,"is_private_email":"yes"}"#,
            #"{"type":"email-enabled","sub":"001.a","event_time":1764100000000,"is_private_email":1}"#,
            #"{"type":"email-enabled","sub":"001.a","event_time":1764100000000,"email":7}"#,
            #"{"type":"email-enabled","sub":"\#(String(repeating: "s", count: 256))","event_time":1764100000000}"#,
            #"{"type":"email-enabled","sub":"001.a","event_time":999}"#,
            #"{"type":"email-enabled","sub":"001.a","event_time":99999999999999999999999}"#,
            #"{"type":"email-enabled","sub":"001.a","event_time":1764100000000,"type":"x"}"#,
        ]
        for event in events {
            let forced = try #require(Self.forcingTheDecoder(event))
            let plain = await outcome(header: header, claims: Self.claims(events: Self.events(event)))
            #expect(plain == (await outcome(header: header, claims: Self.claims(events: Self.events(forced)))), "\(event)")
        }
        #expect(await outcome(header: header, claims: Self.claims(events: Self.events(events[1]))).contains(#"001.\"q\"\\b"#))
    }

    @Test func headersReadTheSameEitherWay() async throws {
        let kid = apple.currentKey.kid
        let headers = [
            header,
            #"{"kid":"\#(kid)","alg":"RS256","typ":"JWT"}"#,
            #"{"kid":"\#(kid)","alg":"RS256","typ":7}"#,
            #"{"kid":"\#(kid)","alg":null}"#,
            #"{"kid":"\#(kid)","alg":"HS256"}"#,
            #"{"kid":"\#(kid)","alg":"RS256","crit":["b64"]}"#,
            #"{"kid":"\#(kid)","alg":"RS256","crit":null}"#,
            #"{"kid":1,"alg":"RS256"}"#,
            #"{"kid":"\#(kid)","alg":"RS\u0032\u0035\u0036"}"#,
            #"{"kid":"\#(kid)","alg":"RS256","alg":"none"}"#,
        ]
        for raw in headers {
            let forced = try #require(Self.forcingTheDecoder(raw))
            let plain = await outcome(header: raw, claims: Self.claims())
            #expect(plain == (await outcome(header: forced, claims: Self.claims())), "\(raw)")
        }
        #expect(await outcome(header: headers[1], claims: Self.claims()).hasPrefix("ok "))
    }

    /// Apple's token answer (a sign-in's code exchange, a refresh): read in
    /// one pass, it comes out as JSONDecoder reads it, or as nothing where
    /// JSONDecoder refuses it.
    @Test func tokenAnswersReadTheSameEitherWay() {
        let bodies = [
            #"{"access_token":"a.b","token_type":"Bearer","expires_in":3600,"refresh_token":"r.x","id_token":"e.y.z"}"#,
            #"{"access_token":"a","token_type":"Bearer","expires_in":3600,"id_token":"e.y.z"}"#,
            #"{"access_token":"a","token_type":"Bearer","expires_in":3600,"refresh_token":null,"id_token":null}"#,
            #" { "token_type" : "Bearer" , "expires_in" : 3600 , "access_token" : "a\/b\"c" , "extra" : true } "#,
            #"{"access_token":"a","token_type":"Bearer","expires_in":3600,"scope":["x"]}"#,
            #"{"access_token":"a","access_token":"b","token_type":"Bearer","expires_in":3600}"#,
            #"{"access_token":"caf\u00e9","token_type":"Bearer","expires_in":3600}"#,
            #"{"access_token":"a","token_type":"Bearer","expires_in":"3600"}"#,
            #"{"access_token":"a","token_type":"Bearer"}"#,
            #"{"access_token":1,"token_type":"Bearer","expires_in":3600}"#,
            #"{"access_token":"a","token_type":"Bearer","expires_in":3600.5}"#,
            #"{"access_token":"a","token_type":"Bearer","expires_in":3600,"refresh_token":7}"#,
            #"{"access_token":"a","token_type":"Bearer","expires_in":3600"#,
            "[]", "", "null",
        ]
        for body in bodies {
            let data = Data(body.utf8)
            #expect(AppleTokenResponse.decoding(data) == (try? JSONDecoder().decode(AppleTokenResponse.self, from: data)), "\(body)")
        }
        #expect(AppleTokenResponse.decoding(Data(bodies[0].utf8))
                == AppleTokenResponse(accessToken: "a.b", tokenType: "Bearer", expiresIn: 3600, refreshToken: "r.x", idToken: "e.y.z"))
        #expect(AppleTokenResponse.decoding(Data(bodies[7].utf8)) == nil)
    }
}
