import AccountLifecycle
import Foundation
import HTTPTypes
import SIWAClient
import Testing

/// SIWAClient's side of the app events webhook, without a network: siwa's
/// signing code (StandardWebhook, as `siwa worker` signs) against the
/// client's verification, written apart; every refusal has its own error.
@Suite("SIWAClient: app event verification")
struct AppEventVerifierTests {
    static let body = Data(#"{"type":"apple.email-disabled","timestamp":"2026-11-26T08:00:00.035000Z","data":{"jti":"J1","sub":"001.v.1","team":"ABCDE12345","client_id":"com.example.app","purge":false,"apple_type":"email-disabled","event_time":1795680000035,"is_private_email":true,"older_than_sign_in":false}}"#.utf8)
    static let now = Date(timeIntervalSince1970: 1_795_680_001)

    /// A delivery as siwa's worker signs it, with each of `secrets`.
    static func signed(_ body: Data = body, id: String = "evt_1_1", at time: Date = now, secrets: [String]) throws -> HTTPFields {
        let timestamp = Int(time.timeIntervalSince1970)
        let keys = try secrets.map(StandardWebhook.strictKey(fromSecret:))
        var headers = HTTPFields()
        headers[HTTPField.Name("webhook-id")!] = id
        headers[HTTPField.Name("webhook-timestamp")!] = String(timestamp)
        headers[HTTPField.Name("webhook-signature")!] = StandardWebhook.signatures(id: id, timestamp: timestamp, body: body, keys: keys)
        return headers
    }

    @Test func aDeliverySignedBySiwaIsVerifiedAndDecoded() throws {
        let secret = StandardWebhook.newSecret()
        let event = try AppEventVerifier(secret: secret).verify(headers: try Self.signed(secrets: [secret]), body: Self.body, now: Self.now)
        #expect(event.id == "evt_1_1" && event.type == "apple.email-disabled" && event.kind == .appleEmailDisabled)
        #expect(event.data.sub == "001.v.1" && event.data.team == "ABCDE12345" && event.data.clientID == "com.example.app")
        #expect(event.data.eventTime == 1_795_680_000_035 && event.data.isPrivateEmail == true && event.data.purge == false)
        #expect(event.data.email == nil && event.data.olderThanSignIn == false)
        // Microseconds, as siwa writes Apple's event_time.
        #expect(event.date == Date(timeIntervalSince1970: 1_795_680_000.035))
    }

    /// A rotation: siwa signs with both secrets; a receiver with either
    /// secret, or with both, accepts; a stranger's secret does not.
    @Test func duringARotationEitherSecretVerifies() throws {
        let (old, new) = (StandardWebhook.newSecret(), StandardWebhook.newSecret())
        let headers = try Self.signed(secrets: [old, new])
        for secrets in [[old], [new], [new, old]] {
            #expect(throws: Never.self) { try AppEventVerifier(secrets: secrets).verify(headers: headers, body: Self.body, now: Self.now) }
        }
        #expect(throws: AppEventVerificationError.noMatchingSignature) {
            try AppEventVerifier(secret: StandardWebhook.newSecret()).verify(headers: headers, body: Self.body, now: Self.now)
        }
    }

    /// What is signed is the id, the timestamp and the body's bytes: a
    /// change to any of them fails, as does a signature of another scheme.
    @Test func anAlteredDeliveryIsRefused() throws {
        let secret = StandardWebhook.newSecret()
        let verifier = try AppEventVerifier(secret: secret)
        let headers = try Self.signed(secrets: [secret])
        var body = Self.body
        body[body.count - 3] = UInt8(ascii: "u")  // the last "false" becomes "falsu"
        #expect(throws: AppEventVerificationError.noMatchingSignature) { try verifier.verify(headers: headers, body: body, now: Self.now) }
        var otherID = headers
        otherID[HTTPField.Name("webhook-id")!] = "evt_1_2"
        #expect(throws: AppEventVerificationError.noMatchingSignature) { try verifier.verify(headers: otherID, body: Self.body, now: Self.now) }
        let signature = try #require(headers[HTTPField.Name("webhook-signature")!])
        #expect(throws: AppEventVerificationError.noMatchingSignature) {
            try verifier.verify(id: "evt_1_1", timestamp: "1795680002", signature: signature, body: Self.body, now: Self.now)
        }
        #expect(throws: AppEventVerificationError.noMatchingSignature) {
            try verifier.verify(id: "evt_1_1", timestamp: "1795680001", signature: "v1a," + signature.dropFirst(3), body: Self.body, now: Self.now)
        }
        #expect(throws: AppEventVerificationError.noMatchingSignature) {
            try verifier.verify(id: "evt_1_1", timestamp: "1795680001", signature: "v1,not-base64!", body: Self.body, now: Self.now)
        }
    }

    /// Standard Webhooks' 5 minutes, both ways: a recorded delivery sent
    /// again later fails, and so does one dated ahead.
    @Test func theTimestampMustBeWithinFiveMinutes() throws {
        let secret = StandardWebhook.newSecret()
        let verifier = try AppEventVerifier(secret: secret)
        let headers = try Self.signed(secrets: [secret])
        #expect(throws: Never.self) { try verifier.verify(headers: headers, body: Self.body, now: Self.now.addingTimeInterval(299)) }
        #expect(throws: Never.self) { try verifier.verify(headers: headers, body: Self.body, now: Self.now.addingTimeInterval(-299)) }
        #expect(throws: AppEventVerificationError.timestampTooOld(seconds: 301)) {
            try verifier.verify(headers: headers, body: Self.body, now: Self.now.addingTimeInterval(301))
        }
        #expect(throws: AppEventVerificationError.timestampInFuture(seconds: 301)) {
            try verifier.verify(headers: headers, body: Self.body, now: Self.now.addingTimeInterval(-301))
        }
        for bad in ["-1", "1795680001.5", " 1795680001", "17956800010000000", "soon"] {
            #expect(throws: AppEventVerificationError.malformedTimestamp, "\(bad)") {
                try verifier.verify(id: "evt_1_1", timestamp: bad, signature: "v1,x", body: Self.body, now: Self.now)
            }
        }
    }

    @Test func missingHeadersAndBadSecretsAreNamed() throws {
        let verifier = try AppEventVerifier(secret: StandardWebhook.newSecret())
        #expect(throws: AppEventVerificationError.missingHeader("webhook-id")) {
            try verifier.verify(id: nil, timestamp: "1", signature: "v1,x", body: Self.body, now: Self.now)
        }
        #expect(throws: AppEventVerificationError.missingHeader("webhook-timestamp")) {
            try verifier.verify(id: "e", timestamp: "", signature: "v1,x", body: Self.body, now: Self.now)
        }
        #expect(throws: AppEventVerificationError.missingHeader("webhook-signature")) {
            try verifier.verify(headers: HTTPFields([HTTPField(name: HTTPField.Name("webhook-id")!, value: "e"),
                                                     HTTPField(name: HTTPField.Name("webhook-timestamp")!, value: "1")]),
                                body: Self.body, now: Self.now)
        }
        for secret in ["", "whsec_", "whsec_!!", "not-whsec", "whsec_" + Data(count: 16).base64EncodedString(),
                       "whsec_" + Data(count: 65).base64EncodedString()] {
            #expect(throws: AppEventSecretError.self, "\(secret)") { try AppEventVerifier(secret: secret) }
        }
        #expect(throws: AppEventSecretError.self) { try AppEventVerifier(secrets: []) }
    }

    /// Signed by siwa but not an envelope: refused as such, not as a signature.
    @Test func aSignedBodyThatIsNoEnvelopeIsMalformed() throws {
        let secret = StandardWebhook.newSecret()
        let body = Data(#"{"type":"x"}"#.utf8)
        #expect(throws: AppEventVerificationError.malformedBody) {
            try AppEventVerifier(secret: secret).verify(headers: try Self.signed(body, secrets: [secret]), body: body, now: Self.now)
        }
    }

    /// Every type siwa sends has its kind; a field of an unexpected type, or
    /// one this library does not know, is no refusal of the event.
    @Test func everyTypeHasItsKindAndNewFieldsAreTolerated() throws {
        let kinds: [String: AppEventKind] = [
            "apple.email-disabled": .appleEmailDisabled, "apple.email-enabled": .appleEmailEnabled,
            "apple.consent-revoked": .appleConsentRevoked, "apple.account-delete": .appleAccountDeleted,
            "apple.account-deleted": .appleAccountDeleted, "apple.some-future-type": .appleOther("some-future-type"),
            "consent.revoked": .consentRevoked, "user.signed_in": .userSignedIn, "user.deletion_requested": .userDeletionRequested,
            "user.transferred": .userTransferred, "purge.completed": .purgeCompleted, "purge.failed": .purgeFailed,
            "purge.cancelled": .purgeCancelled, "token.invalid_grant": .tokenInvalidGrant, "siwa.test": .test,
            "siwa.something_new": .unknown("siwa.something_new"),
        ]
        for (type, kind) in kinds { #expect(AppEventKind(type: type) == kind, "\(type)") }
        let event = try AppEvent(id: "evt_9_1", body: Data("""
            {"type":"token.invalid_grant","timestamp":"2026-11-26T08:00:00Z","data":{"sub":"s","team":"T","user_id":"7",
             "session_ended":true,"purge":false,"a_field_of_tomorrow":{"x":[1]}},"another":1}
            """.utf8))
        #expect(event.kind == .tokenInvalidGrant && event.data.userID == nil && event.data.sessionEnded == true && event.data.purge == false)
        #expect(event.date == Date(timeIntervalSince1970: 1_795_680_000))
    }

    /// `receive`: a seen id is answered without acting; an id is recorded
    /// only once its handling succeeded, so siwa's retry acts again.
    @Test func receiveSkipsSeenIDsAndRecordsOnlyHandledOnes() async throws {
        struct HandlerFailed: Error {}
        let secret = StandardWebhook.newSecret()
        let verifier = try AppEventVerifier(secret: secret)
        let seen = InMemorySeenAppEventIDs(capacity: 2)
        let now = Date()
        let headers = try Self.signed(at: now, secrets: [secret])
        await #expect(throws: HandlerFailed.self) {
            _ = try await verifier.receive(headers: headers, body: Self.body, seen: seen, now: now) { _ in throw HandlerFailed() }
        }
        #expect(try await seen.contains("evt_1_1") == false)
        let first = try await verifier.receive(headers: headers, body: Self.body, seen: seen, now: now) { _ in }
        let again = try await verifier.receive(headers: headers, body: Self.body, seen: seen, now: now) { _ in Issue.record("acted twice") }
        guard case .handled(let event) = first, case .alreadySeen = again else {
            Issue.record("\(first) \(again)")
            return
        }
        #expect(event.id == "evt_1_1")
        // Bounded: the oldest id goes first.
        try await seen.insert("evt_2_1")
        try await seen.insert("evt_3_1")
        #expect(try await seen.contains("evt_1_1") == false)
        #expect(try await seen.contains("evt_2_1"))
        #expect(try await seen.contains("evt_3_1"))
    }
}
