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
    public let userID: Int64
    public let appleSub: String
    public let status: String
    public let email: String?
    public let emailVerified: Bool?
    public let isPrivateEmail: Bool?
    public let givenName: String?
    public let familyName: String?
    public let realUserStatus: Int?
    public let isNewUser: Bool
    public let refreshTokenStored: Bool

    public init(_ user: SignedInUser) {
        self.init(userID: user.userID, appleSub: user.appleSub, status: user.status, email: user.email,
                  emailVerified: user.emailVerified, isPrivateEmail: user.isPrivateEmail, givenName: user.givenName,
                  familyName: user.familyName, realUserStatus: user.realUserStatus.map { RealUserStatus(claim: $0).rawValue },
                  isNewUser: user.isNewUser, refreshTokenStored: user.refreshTokenStored)
    }

    public init(userID: Int64, appleSub: String, status: String, email: String?, emailVerified: Bool? = nil, isPrivateEmail: Bool?,
                givenName: String? = nil, familyName: String? = nil, realUserStatus: Int?, isNewUser: Bool, refreshTokenStored: Bool) {
        self.userID = userID
        self.appleSub = appleSub
        self.status = status
        self.email = email
        self.emailVerified = emailVerified
        self.isPrivateEmail = isPrivateEmail
        self.givenName = givenName
        self.familyName = familyName
        self.realUserStatus = realUserStatus
        self.isNewUser = isNewUser
        self.refreshTokenStored = refreshTokenStored
    }

    enum CodingKeys: String, CodingKey {
        case userID = "user_id", appleSub, status, email, emailVerified, isPrivateEmail, givenName, familyName, realUserStatus
        case isNewUser, refreshTokenStored
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(userID, forKey: .userID)
        try container.encode(appleSub, forKey: .appleSub)
        try container.encode(status, forKey: .status)
        try container.encode(email, forKey: .email)
        try container.encode(emailVerified, forKey: .emailVerified)
        try container.encode(isPrivateEmail, forKey: .isPrivateEmail)
        try container.encode(givenName, forKey: .givenName)
        try container.encode(familyName, forKey: .familyName)
        try container.encode(realUserStatus, forKey: .realUserStatus)
        try container.encode(isNewUser, forKey: .isNewUser)
        try container.encode(refreshTokenStored, forKey: .refreshTokenStored)
    }

    /// The encoder's bytes (keys sorted), written by hand: on the hot path
    /// JSONEncoder costs more than the rest of the answer.
    public var json: String {
        func text(_ value: String?) -> String { value.map(JSONText.quoted) ?? "null" }
        func flag(_ value: Bool?) -> String { value.map { $0 ? "true" : "false" } ?? "null" }
        return #"{"apple_sub":\#(JSONText.quoted(appleSub)),"email":\#(text(email)),"#
            + #""email_verified":\#(flag(emailVerified)),"family_name":\#(text(familyName)),"given_name":\#(text(givenName)),"#
            + #""is_new_user":\#(flag(isNewUser)),"is_private_email":\#(flag(isPrivateEmail)),"#
            + #""real_user_status":\#(realUserStatus.map(String.init) ?? "null"),"#
            + #""refresh_token_stored":\#(flag(refreshTokenStored)),"status":\#(JSONText.quoted(status)),"#
            + #""user_id":\#(userID)}"#
    }
}
