import AccountLifecycle
import AccountStore
import AppleSignIn
import Foundation
import Hummingbird
import SIWAServer
import Testing

/// The two hot answers (the notification route's and `POST /v1/sign-in`'s)
/// are written by hand; for every outcome they must be the bytes the shared
/// encoder (`AnswerJSON`) writes for the same Codable value. Answers with a
/// documented order that is not sorted (`{"error", "detail"}`, `{"status",
/// "event_type"}`) are compared with `AnswerJSON.inOrder`, which encodes
/// each key and value as `AnswerJSON.encode` does.
@Suite("Answer bytes")
struct AnswerBytesTests {
    /// Strings that take each branch of a JSON string writer: escapes,
    /// control characters, slashes, multi-byte UTF-8, line separators.
    static let awkward = ["", "plain", "quote\" back\\slash", "ctl\u{0}\u{1}\u{8}\u{C}\u{1F}\n\r\t\u{7F}", "a/b é 日本 😀 \u{2028}"]

    static func encoded(_ value: some Encodable) throws -> String {
        String(decoding: try AnswerJSON.encode(value), as: UTF8.self)
    }

    static func expected(_ error: ErrorAnswer) throws -> String {
        String(decoding: try AnswerJSON.inOrder(["error": error.error, "detail": error.detail]), as: UTF8.self)
    }

    @Test("the sign-in answer, every outcome, is the encoder's bytes")
    func signIn() throws {
        var users: [SignedInAnswer] = []
        for text in Self.awkward {
            users.append(SignedInAnswer(SignedInUser(userID: 1, appleSub: text, appleTeam: text, clientID: text, status: text,
                                                     email: text, emailVerified: nil, isPrivateEmail: true, givenName: nil,
                                                     familyName: nil, realUserStatus: 2, isNewUser: true, refreshTokenStored: false)))
            users.append(SignedInAnswer(SignedInUser(userID: 2, appleSub: "001.n", appleTeam: "TEAM123456", clientID: nil,
                                                     status: "active", email: text, emailVerified: false, isPrivateEmail: false,
                                                     givenName: text, familyName: text, realUserStatus: 1, isNewUser: false,
                                                     refreshTokenStored: true)))
        }
        // A real_user_status Apple may add is answered 1 (unknown), as the encoder is given it.
        let added = SignedInAnswer(SignedInUser(userID: 3, appleSub: "001.c", appleTeam: "TEAM123456", clientID: "com.example.app",
                                                status: "active", email: nil, emailVerified: nil,
                                                isPrivateEmail: nil, givenName: "Ada", familyName: nil, realUserStatus: 7,
                                                isNewUser: true, refreshTokenStored: false))
        #expect(added.realUserStatus == 1 && added.json.contains(#""real_user_status":1,"#))
        users.append(added)
        users.append(SignedInAnswer(SignedInUser(userID: Int64.max, appleSub: "001.a", appleTeam: "TEAM123456", clientID: "web",
                                                 status: "active", email: nil, emailVerified: nil, isPrivateEmail: nil, givenName: nil,
                                                 familyName: nil, realUserStatus: nil, isNewUser: false, refreshTokenStored: true)))
        users.append(SignedInAnswer(SignedInUser(userID: 0, appleSub: "001.b", appleTeam: "TEAM123456", clientID: nil,
                                                 status: "revoked", email: "x@privaterelay.appleid.com", emailVerified: nil,
                                                 isPrivateEmail: false, givenName: nil, familyName: nil, realUserStatus: 0,
                                                 isNewUser: false, refreshTokenStored: false)))
        // (`SignInAnswer(.signedIn(user))` answers 200 with `SignedInAnswer(user).json`.)
        for user in users {
            #expect(user.json == (try Self.encoded(user)))
        }

        var refusals: [(SignInOutcome, HTTPResponse.Status, Int?)] = Self.awkward.map { (.refused(reason: $0, detail: $0), .badRequest, nil) }
        refusals += [
            (.deletionInProgress, .conflict, 10),
            (.staleIdentityToken, .conflict, nil),
            (.appleRejectedClient, .badGateway, nil),
            (.unavailable(retryAfterSeconds: 5, detail: "the database is unavailable"), .serviceUnavailable, 5),
            (.unavailable(retryAfterSeconds: 30, detail: Self.awkward[3]), .serviceUnavailable, 30),
        ]
        for (outcome, status, retryAfter) in refusals {
            let answer = SignInAnswer(outcome)
            guard case .refused(let error) = answer.body else {
                Issue.record("\(outcome) answered \(answer.json)")
                continue
            }
            #expect(answer.status == status && answer.retryAfterSeconds == retryAfter, "\(outcome)")
            #expect(answer.json == (try Self.expected(error)), "\(outcome)")
            #expect(answer.json.hasPrefix(#"{"error":"#))
        }
    }

    @Test("the notification answer, every outcome, is the encoder's bytes")
    func notification() throws {
        var results: [ReceiveResult] = []
        for type in Self.awkward + ["consent-revoked", String(repeating: "é", count: 100)] {
            results.append(.accepted(.recorded(notificationID: 1, purgeJobID: 2), eventType: type, team: "TEAM123456", clientID: type))
            results.append(.accepted(.recorded(notificationID: 1, purgeJobID: nil), eventType: type, team: type, clientID: "app"))
            results.append(.accepted(.duplicate, eventType: type, team: "TEAM123456", clientID: "com.example.app"))
            results.append(.unavailable(type))
            results.append(.rejected(Rejection(reason: type, detail: type)))
        }
        let bodies: [Rejection] = [.emptyBody, .malformedBody, .missingPayload, .unreadableBody, .bodyTooLarge(limit: 65536)]
        let failures: [VerificationFailure] = [
            .malformedToken("x"), .malformedHeader("x"), .unsupportedAlgorithm("HS256"), .unsupportedCritical, .missingKeyID, .unknownKeyID,
            .badSignature, .malformedClaims("x"), .wrongIssuer, .missingAudience, .wrongAudience, .missingExpiry, .expired,
            .expiryOutOfRange, .missingIssuedAt, .issuedInFuture, .issuedAtOutOfRange, .missingJTI, .malformedEvents("x"),
            .missingSubject, .nonceMismatch, .nonceMissing,
        ]
        results += (bodies + failures.map(Rejection.token)).map(ReceiveResult.rejected)
        for result in results {
            let answer = NotificationAnswer(result)
            switch (result, answer.body) {
            case (.accepted(let outcome, let type, let team, let clientID), .accepted(let accepted)):
                #expect(answer.status == .ok)
                #expect(accepted.status == (outcome == .duplicate ? "duplicate" : "recorded") && accepted.eventType == String(type.prefix(64)))
                #expect(accepted.team == team && accepted.clientID == clientID)
                let expected = try AnswerJSON.inOrder(["status": accepted.status, "event_type": accepted.eventType, "team": team,
                                                       "client_id": clientID])
                #expect(answer.json == String(decoding: expected, as: UTF8.self))
            case (.rejected(let rejection), .refused(let error)):
                #expect(answer.status == .badRequest && error == ErrorAnswer(rejection.reason, rejection.detail))
                #expect(answer.json == (try Self.expected(error)))
            case (.unavailable(let why), .refused(let error)):
                #expect(answer.status == .serviceUnavailable && error == ErrorAnswer("unavailable", "\(why); retry later"))
                #expect(answer.json == (try Self.expected(error)))
            default:
                Issue.record("\(result) answered \(answer.json)")
            }
        }
    }

    /// The members' encoding alone, sorted: `inOrder` is the encoder's
    /// bytes but for the order of the keys.
    @Test("inOrder differs from the encoder only in the order of the keys")
    func inOrderIsTheEncoders() throws {
        for text in Self.awkward {
            let error = ErrorAnswer(text, text + "!")
            let sorted = String(decoding: try AnswerJSON.inOrder(["detail": error.detail, "error": error.error]), as: UTF8.self)
            #expect(sorted == (try Self.encoded(error)))
        }
    }
}
