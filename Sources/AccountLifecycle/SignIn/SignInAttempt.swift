import AppleSignIn
import Foundation

/// One sign-in: what Apple handed the app (the name only at the first
/// authorization). The HTTP layer reads it from the request body. A native
/// app has an identity token (and a code); a web client that asked Apple
/// for `response_type=code` has only the code, its `clientID` and
/// `redirectURI`, and siwa takes the identity token from Apple's answer to it.
public struct SignInAttempt: Sendable {
    public var identityToken: String?
    public var authorizationCode: String?
    /// The client id the code was issued to (required without an identity
    /// token; with one, it must be the token's `aud`).
    public var clientID: String?
    /// The raw nonce the app made; the token's `nonce` claim must be its
    /// SHA-256 in lower-case hex (what the app put in Apple's request).
    public var nonce: String?
    public var redirectURI: String?
    public var givenName: String?
    public var familyName: String?

    public init(identityToken: String?, authorizationCode: String? = nil, clientID: String? = nil, nonce: String? = nil,
                redirectURI: String? = nil, givenName: String? = nil, familyName: String? = nil) {
        self.identityToken = identityToken
        self.authorizationCode = authorizationCode
        self.clientID = clientID
        self.nonce = nonce
        self.redirectURI = redirectURI
        self.givenName = givenName
        self.familyName = familyName
    }
}

/// What `POST /v1/sign-in` needs beside the identity token
/// (`SIWA_SIGN_IN_REQUIRES`). An identity token can be replayed until it
/// expires; Apple honours an authorization code once.
public enum SignInRequirement: String, Sendable, CaseIterable {
    /// An authorization code (the default): a replayed token alone gets nothing.
    case code
    /// An authorization code, or a nonce whose SHA-256 the token carries.
    case codeOrNonce = "code_or_nonce"
    /// The identity token alone (weaker: anyone holding a user's unexpired
    /// token can sign in as them).
    case token
}

/// The sign-in answer's user.
public struct SignedInUser: Sendable, Equatable {
    public let userID: Int64
    public let appleSub: String
    /// The developer team `appleSub` belongs to.
    public let appleTeam: String
    /// The client id (`aud`) the user signed in with; for a retried
    /// request's first answer, the user's latest client id.
    public let clientID: String?
    public let status: String
    public let email: String?
    public let emailVerified: Bool?
    public let isPrivateEmail: Bool?
    public let givenName: String?
    public let familyName: String?
    /// As Apple sent it (the answer reads one outside 0–2 as unknown).
    public let realUserStatus: Int?
    public let isNewUser: Bool
    public let refreshTokenStored: Bool

    public init(userID: Int64, appleSub: String, appleTeam: String, clientID: String?, status: String, email: String?,
                emailVerified: Bool?, isPrivateEmail: Bool?, givenName: String?, familyName: String?, realUserStatus: Int?,
                isNewUser: Bool, refreshTokenStored: Bool) {
        self.userID = userID
        self.appleSub = appleSub
        self.appleTeam = appleTeam
        self.clientID = clientID
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
}

public enum SignInOutcome: Sendable {
    case signedIn(SignedInUser)
    /// 400 with a reason code (the verifier's, `invalid_grant`, `token_mismatch`,
    /// `redirect_uri_required`, `identity_token_or_code_required`, ...).
    case refused(reason: String, detail: String)
    /// 409: the user's purge is pending.
    case deletionInProgress
    /// 409: the token was issued at or before the user's last revocation,
    /// deletion, purge or ended session.
    case staleIdentityToken
    /// 502: Apple refused siwa's own credentials (`invalid_client`).
    case appleRejectedClient
    /// 503: Apple or the database cannot answer now.
    case unavailable(retryAfterSeconds: Int, detail: String)
}
