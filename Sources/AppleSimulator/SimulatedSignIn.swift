import Foundation

/// What Apple hands an app when a user signs in (`AppleSimulator.signIn`):
/// the identity token, a fresh authorization code and, on the first
/// authorization only, the `user` object with the names the user shared.
public struct SimulatedSignIn: Sendable {
    public let identityToken: String
    public let authorizationCode: String
    /// The user authorized the app for the first time (or the first time
    /// since they revoked it).
    public let firstAuthorization: Bool
    /// Apple's `user` JSON (`{"name": {"firstName", "lastName"}, "email"}`),
    /// first authorization only; nil otherwise, as Apple sends it once.
    public let user: [String: any Sendable]?

    /// The body `POST /v1/sign-in` takes, as the app passes it on (the raw
    /// `nonce` is the app's to add).
    public var signInBody: [String: any Sendable] {
        var body: [String: any Sendable] = ["identity_token": identityToken, "authorization_code": authorizationCode]
        if let user { body["user"] = user }
        return body
    }
}

extension AppleSimulator {
    /// A user signs in to a native app (or, with `redirectURI`, a web
    /// client), as Apple answers it: `real_user_status` only on a native
    /// app's first authorization, the names only then, `is_private_email`
    /// as `setPrivateEmailClaim` says. A revocation (`/auth/revoke`, or
    /// `revokeRefreshToken`) makes the next sign-in a first one again.
    /// - Parameters:
    ///   - nonce: the value the app put in Apple's request (echoed in the token).
    ///   - givenName, familyName: what the user shares at the first authorization.
    ///   - realUserStatus: what Apple decides for this user (sent once).
    ///   - transferSub: the `transfer_sub` claim (a transferred app's user,
    ///     within the 60 days: `transferredSignIn` sets it).
    public func signIn(sub: String, clientID: String, email: String? = nil, nonce: String? = nil, redirectURI: String? = nil,
                       givenName: String? = nil, familyName: String? = nil, realUserStatus: Int = 2,
                       issuedAt: Date? = nil, transferSub: String? = nil) throws -> SimulatedSignIn {
        let first = authorizeOnce(sub: sub, clientID: clientID)
        let status = first && redirectURI == nil ? realUserStatus : nil
        let now = issuedAt ?? tokenState.withLock { $0.now() }
        let key = currentKey
        let claims = TokenSigner.identityClaims(sub: sub, audience: clientID, issuedAt: now, email: email, nonce: nonce,
                                                realUserStatus: status, omitsPrivateEmail: omitsPrivateEmail(email: email, asked: nil),
                                                transferSub: transferSub)
        let token = try signer.sign(header: ["kid": key.kid, "alg": "RS256"], claims: claims, key: key)
        let grant = TokenEndpointState.Grant(sub: sub, clientID: clientID, email: email, isPrivateEmail: nil,
                                             realUserStatus: status, idTokenSub: nil, transferSub: transferSub)
        let code = issueCode(grant, nonce: nonce, redirectURI: redirectURI)
        var user: [String: any Sendable]?
        if first, givenName != nil || familyName != nil || email != nil {
            var name: [String: any Sendable] = [:]
            if let givenName { name["firstName"] = givenName }
            if let familyName { name["lastName"] = familyName }
            var object: [String: any Sendable] = ["name": name]
            if let email { object["email"] = email }
            user = object
        }
        return SimulatedSignIn(identityToken: token, authorizationCode: code, firstAuthorization: first, user: user)
    }
}
