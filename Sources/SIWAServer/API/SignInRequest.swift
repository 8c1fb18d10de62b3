import AccountLifecycle

/// What the app's backend sends to `POST /v1/sign-in`: what Apple handed
/// the app (`user` only at the first authorization), as Apple names it.
struct SignInRequest: Decodable {
    struct User: Decodable {
        struct Name: Decodable {
            var firstName: String?
            var lastName: String?
        }
        var name: Name?
        var email: String?
    }

    var identityToken: String
    var authorizationCode: String?
    var nonce: String?
    var redirectURI: String?
    var user: User?

    enum CodingKeys: String, CodingKey {
        case identityToken = "identity_token", authorizationCode = "authorization_code", nonce
        case redirectURI = "redirect_uri", user
    }

    var attempt: SignInAttempt {
        SignInAttempt(identityToken: identityToken, authorizationCode: authorizationCode, nonce: nonce, redirectURI: redirectURI,
                      givenName: user?.name?.firstName, familyName: user?.name?.lastName)
    }
}
