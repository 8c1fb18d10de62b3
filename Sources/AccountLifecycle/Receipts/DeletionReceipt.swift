import AccountStore
import AppleSignIn
import Foundation

/// The claims of a deletion receipt: a compact JWS (ES256, header
/// `{"alg":"ES256","kid":<RFC 7638 thumbprint>,"typ":"siwa-deletion-receipt+jwt"}`)
/// that siwa signs when a purge completes: the evidence an operator hands to
/// App Review or to the person who asked for erasure. Times in `purge` are
/// UTC, ISO 8601 with milliseconds; `iat` is Unix seconds, as in any JWT.
/// It holds the Apple sub and what was done, never an email, a name or a token.
public struct DeletionReceipt: Codable, Sendable, Equatable {
    /// The header's `typ` (RFC 8725 §3.11: a receipt cannot pass for another kind of JWT).
    public static let type = "siwa-deletion-receipt+jwt"

    public let iss: String
    /// The Apple `sub` whose data was purged.
    public let sub: String
    /// The developer team `sub` belongs to (Apple's subs are team-scoped);
    /// absent from receipts signed before siwa knew of several teams.
    public let team: String?
    /// The client id (app or website) the user's request came through: the
    /// notification's `aud`, else the user's latest client; absent when
    /// siwa never saw one.
    public let clientID: String?
    public let jti: String
    public let iat: Int64
    public let purge: Purge

    enum CodingKeys: String, CodingKey { case iss, sub, team, clientID = "client_id", jti, iat, purge }

    public struct Purge: Codable, Sendable, Equatable {
        /// siwa's job id (the audit trail's `job_id`).
        public let jobID: Int64
        public let event: Event
        /// When the purge was enqueued.
        public let requestedAt: String
        public let completedAt: String
        /// Every step, in the order they completed (the revocation, siwa's
        /// own erase, then the operator's plan).
        public let steps: [Step]
        public let appleTokenRevocation: Revocation

        enum CodingKeys: String, CodingKey {
            case jobID = "job_id", event, requestedAt = "requested_at", completedAt = "completed_at", steps
            case appleTokenRevocation = "apple_token_revocation"
        }
    }

    /// What asked for the purge. Both are null for a job enqueued by hand.
    public struct Event: Codable, Sendable, Equatable {
        /// account-delete, account-deleted, consent-revoked (under `purge`),
        /// app-deletion (DELETE /v1/users), token-invalid-grant.
        public let type: String?
        /// Apple's event_time for a notification; when siwa received it for its own events.
        public let time: String?

        public init(type: String?, time: String?) {
            self.type = type
            self.time = time
        }

        enum CodingKeys: String, CodingKey { case type, time }

        // Written even when null, so a reader sees the field is unknown, not forgotten.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(type, forKey: .type)
            try container.encode(time, forKey: .time)
        }
    }

    public struct Step: Codable, Sendable, Equatable {
        public let name: String
        public let completedAt: String

        enum CodingKeys: String, CodingKey { case name, completedAt = "completed_at" }
    }

    /// The Apple tokens siwa held for the user when the purge ran.
    public struct Revocation: Codable, Sendable, Equatable {
        /// `revoked`: each stored token was revoked at Apple (`tokens`
        /// holds Apple's HTTP status for each: 200, or 400 for a token
        /// Apple no longer knew); `none_stored`: siwa held no token; `manual`:
        /// an operator deleted a token siwa could not revoke
        /// (`forgotten_client_ids`), which the user revokes at Apple by hand.
        public let outcome: String
        public let tokens: [Token]
        public let forgottenClientIDs: [String]

        public init(outcome: String, tokens: [Token], forgottenClientIDs: [String]) {
            self.outcome = outcome
            self.tokens = tokens
            self.forgottenClientIDs = forgottenClientIDs
        }

        enum CodingKeys: String, CodingKey { case outcome, tokens, forgottenClientIDs = "forgotten_client_ids" }
    }

    public struct Token: Codable, Sendable, Equatable {
        public let clientID: String
        public let appleStatus: Int

        public init(clientID: String, appleStatus: Int) {
            self.clientID = clientID
            self.appleStatus = appleStatus
        }

        enum CodingKeys: String, CodingKey { case clientID = "client_id", appleStatus = "apple_status" }
    }

    public init(issuer: String, jti: String, issuedAt: Date, facts: PurgeFacts) {
        iss = issuer
        sub = facts.appleSub
        team = facts.appleTeam
        clientID = facts.clientID
        self.jti = jti
        iat = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        let outcome = !facts.forgottenClientIDs.isEmpty ? "manual" : facts.revocations.isEmpty ? "none_stored" : "revoked"
        purge = Purge(
            jobID: facts.jobID,
            event: Event(type: facts.eventType, time: facts.eventTime.map(Self.time)),
            requestedAt: Self.time(facts.requestedAt), completedAt: Self.time(facts.completedAt),
            steps: facts.steps.map { Step(name: $0.name, completedAt: Self.time($0.completedAt)) },
            appleTokenRevocation: Revocation(
                outcome: outcome, tokens: facts.revocations.map { Token(clientID: $0.clientID, appleStatus: $0.appleStatus) },
                forgottenClientIDs: facts.forgottenClientIDs))
    }

    /// UTC, milliseconds: `2026-01-02T03:04:05.678Z`.
    public static func time(_ date: Date) -> String {
        UTCTime.text(date)
    }

    /// Checks the signature with `keys`, the header's `typ`, the claims'
    /// shape and, when given, the issuer. The failure is one line.
    public static func verify(_ jws: String, keys: ES256KeySet,
                              issuer: String? = nil) throws(ReceiptVerificationFailure) -> (receipt: DeletionReceipt, keyID: String) {
        let verified: ES256JWS.Verified
        do { verified = try ES256JWS.verify(jws, keys: keys.byKeyID) } catch {
            throw ReceiptVerificationFailure("\(error)")
        }
        guard verified.type == type else {
            throw ReceiptVerificationFailure("the header's typ is not \(type): not a siwa deletion receipt")
        }
        let receipt: DeletionReceipt
        do { receipt = try JSONDecoder().decode(DeletionReceipt.self, from: verified.payload) } catch {
            throw ReceiptVerificationFailure("the claims are not a deletion receipt's (iss, sub, jti, iat, purge)")
        }
        guard !receipt.sub.isEmpty, !receipt.jti.isEmpty else { throw ReceiptVerificationFailure("sub or jti is empty") }
        if let issuer, receipt.iss != issuer {
            throw ReceiptVerificationFailure("iss is \(VerificationFailure.printable(receipt.iss)), not \(issuer)")
        }
        return (receipt, verified.keyID)
    }

    /// The claims as people read them: sorted, indented JSON (`AnswerJSON`).
    public var prettyJSON: String {
        (try? AnswerJSON.pretty(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

/// Why a receipt did not verify: one printable line, never the receipt.
public struct ReceiptVerificationFailure: Error, Sendable, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
