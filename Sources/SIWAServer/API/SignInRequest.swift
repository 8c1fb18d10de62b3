import AccountLifecycle
import Foundation

/// What the app's backend sends to `POST /v1/sign-in`: what Apple handed
/// the app (`user` only at the first authorization), as Apple names it. A
/// native app's body has `identity_token`; a web client's that asked for
/// `response_type=code` has `authorization_code`, `client_id` and
/// `redirect_uri` instead.
struct SignInRequest: Decodable {
    struct User: Decodable {
        struct Name: Decodable {
            var firstName: String?
            var lastName: String?
        }
        var name: Name?
        var email: String?
    }

    var identityToken: String?
    var authorizationCode: String?
    var clientID: String?
    var nonce: String?
    var redirectURI: String?
    var user: User?

    enum CodingKeys: String, CodingKey {
        case identityToken = "identity_token", authorizationCode = "authorization_code", clientID = "client_id", nonce
        case redirectURI = "redirect_uri", user
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        identityToken = try container.decodeIfPresent(String.self, forKey: .identityToken)
        authorizationCode = try container.decodeIfPresent(String.self, forKey: .authorizationCode)
        clientID = try container.decodeIfPresent(String.self, forKey: .clientID)
        nonce = try container.decodeIfPresent(String.self, forKey: .nonce)
        redirectURI = try container.decodeIfPresent(String.self, forKey: .redirectURI)
        // Apple's form_post to a web client's redirect URI carries `user` as
        // a string of JSON: taken as it came, or as the object it holds.
        if let text = try? container.decodeIfPresent(String.self, forKey: .user) {
            user = try JSONDecoder().decode(User.self, from: Data(text.utf8))
        } else {
            user = try container.decodeIfPresent(User.self, forKey: .user)
        }
    }

    var attempt: SignInAttempt {
        SignInAttempt(identityToken: identityToken, authorizationCode: authorizationCode, clientID: clientID, nonce: nonce,
                      redirectURI: redirectURI, givenName: user?.name?.firstName, familyName: user?.name?.lastName)
    }
}
