import AccountLifecycle
import AppleSignIn
import Hummingbird

/// What `POST /v1/sign-in` answers for each outcome: the user (200), or
/// siwa's error shape with the status and `Retry-After` docs/http-api.md gives.
/// Public for AnswerBytesTests, which checks `json` against `AnswerJSON`.
public struct SignInAnswer: Sendable {
    public let status: HTTPResponse.Status
    public let retryAfterSeconds: Int?
    public let body: Body

    public enum Body: Sendable, Equatable {
        case signedIn(SignedInAnswer)
        case refused(ErrorAnswer)
    }

    public init(_ outcome: SignInOutcome) {
        func refused(_ status: HTTPResponse.Status, _ error: String, _ detail: String, retryAfter: Int? = nil) -> (HTTPResponse.Status, Int?, Body) {
            (status, retryAfter, .refused(ErrorAnswer(error, detail)))
        }
        (status, retryAfterSeconds, body) = switch outcome {
        case .signedIn(let user): (.ok, nil, .signedIn(SignedInAnswer(user)))
        case .refused(let reason, let detail): refused(.badRequest, reason, detail)
        case .deletionInProgress:
            refused(.conflict, "deletion_in_progress", "this user's account is being deleted; sign in again once it is", retryAfter: 10)
        case .staleIdentityToken:
            refused(.conflict, "stale_identity_token",
                    "this identity token was issued before the user's access was revoked, their account deleted or their session ended; sign in with Apple again")
        case .appleRejectedClient:
            refused(.badGateway, "apple_rejected_client", "Apple refused siwa's client credentials; the operator must check them")
        case .unavailable(let seconds, let detail): refused(.serviceUnavailable, "unavailable", "\(detail); retry later", retryAfter: seconds)
        }
    }

    /// Written by hand: the hot path of `/v1`.
    public var json: String {
        switch body {
        case .signedIn(let user): user.json
        case .refused(let error): error.json
        }
    }

    var response: Response {
        var response = JSONResponse.answer(status, ByteBuffer(string: json))
        if let retryAfterSeconds { response.headers[.retryAfter] = String(retryAfterSeconds) }
        return response
    }
}

/// The signed-in user: every field present, null when Apple did not say.
/// `real_user_status` is 0, 1 or 2: a value Apple may add outside them is
/// answered 1 (unknown), as it is stored.
public struct SignedInAnswer: Encodable, Sendable, Equatable {
    public let user: SignedInUser

    public init(_ user: SignedInUser) { self.user = user }

    public var realUserStatus: Int? { user.realUserStatus.map { RealUserStatus(claim: $0).rawValue } }

    enum CodingKeys: String, CodingKey {
        case userID = "user_id", appleSub, team, clientID = "client_id", status, email, emailVerified, isPrivateEmail
        case givenName, familyName, realUserStatus, isNewUser, refreshTokenStored
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(user.userID, forKey: .userID)
        try container.encode(user.appleSub, forKey: .appleSub)
        try container.encode(user.appleTeam, forKey: .team)
        try container.encode(user.clientID, forKey: .clientID)
        try container.encode(user.status, forKey: .status)
        try container.encode(user.email, forKey: .email)
        try container.encode(user.emailVerified, forKey: .emailVerified)
        try container.encode(user.isPrivateEmail, forKey: .isPrivateEmail)
        try container.encode(user.givenName, forKey: .givenName)
        try container.encode(user.familyName, forKey: .familyName)
        try container.encode(realUserStatus, forKey: .realUserStatus)
        try container.encode(user.isNewUser, forKey: .isNewUser)
        try container.encode(user.refreshTokenStored, forKey: .refreshTokenStored)
    }

    /// The encoder's bytes (keys sorted), written by hand: on the hot path
    /// JSONEncoder costs more than the rest of the answer.
    public var json: String {
        func text(_ value: String?) -> String { value.map(JSONText.quoted) ?? "null" }
        func flag(_ value: Bool?) -> String { value.map { $0 ? "true" : "false" } ?? "null" }
        return #"{"apple_sub":\#(JSONText.quoted(user.appleSub)),"client_id":\#(text(user.clientID)),"email":\#(text(user.email)),"#
            + #""email_verified":\#(flag(user.emailVerified)),"family_name":\#(text(user.familyName)),"#
            + #""given_name":\#(text(user.givenName)),"#
            + #""is_new_user":\#(flag(user.isNewUser)),"is_private_email":\#(flag(user.isPrivateEmail)),"#
            + #""real_user_status":\#(realUserStatus.map(String.init) ?? "null"),"#
            + #""refresh_token_stored":\#(flag(user.refreshTokenStored)),"status":\#(JSONText.quoted(user.status)),"#
            + #""team":\#(JSONText.quoted(user.appleTeam)),"user_id":\#(user.userID)}"#
    }
}
