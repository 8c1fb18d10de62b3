import Foundation
import Hummingbird

extension AppleSimulator {
    /// `POST /simulator/authorize?sub=SUB&client_id=ID[&email=E][&nonce=N][&given_name=G][&family_name=F][&redirect_uri=URI][&response_type=code]`:
    /// what Apple hands an app when a user signs in (`signIn`), for trying
    /// siwa with curl (`make try`). The answer is a body `POST /v1/sign-in`
    /// takes as it is, with `"user"` at the first authorization:
    /// `{"identity_token", "authorization_code"}` (a native app,
    /// `response_type=code id_token`, the default), or, with
    /// `response_type=code` (a web client, Sign in with Apple JS),
    /// `{"authorization_code", "client_id", "redirect_uri"}` and no identity
    /// token. A code issued with a `redirect_uri` is exchanged at
    /// `/auth/token` only with that same `redirect_uri`, as Apple's is; a
    /// code-only grant requires one, as Apple's authorization request does.
    /// Not an Apple endpoint: the simulator's own, for people and scripts
    /// playing the app.
    func addAuthorizeRoute(to router: Router<SimulatorRequestContext>) {
        router.post("/simulator/authorize") { request, _ -> Response in
            let query = request.uri.queryParameters
            guard let sub = query["sub"].map(String.init), !sub.isEmpty, sub.count <= 255,
                  let clientID = query["client_id"].map(String.init), !clientID.isEmpty else {
                return Self.json(.badRequest, ["error": "sub and client_id are required query parameters"])
            }
            let email: String? = query["email"].map(String.init)
            let nonce: String? = query["nonce"].map(String.init)
            let givenName: String? = query["given_name"].map(String.init)
            let familyName: String? = query["family_name"].map(String.init)
            let redirectURI = query["redirect_uri"].map(String.init).flatMap { $0.isEmpty ? nil : $0 }
            let codeOnly: Bool
            switch query["response_type"].map(String.init) ?? "code id_token" {
            case "code": codeOnly = true
            case "code id_token", "code+id_token": codeOnly = false
            default: return Self.json(.badRequest, ["error": "response_type must be code or code id_token"])
            }
            if codeOnly && redirectURI == nil {
                return Self.json(.badRequest, ["error": "redirect_uri is required with response_type=code (a web client's)"])
            }
            do {
                let signIn = try self.signIn(sub: sub, clientID: clientID, email: email, nonce: nonce, redirectURI: redirectURI,
                                             givenName: givenName, familyName: familyName)
                var answer = signIn.signInBody
                if let redirectURI { answer["redirect_uri"] = redirectURI }
                if codeOnly {
                    answer["identity_token"] = nil
                    answer["client_id"] = clientID
                }
                return Self.json(.ok, answer)
            } catch {
                return Self.json(.internalServerError, ["error": "could not sign: \(error)"])
            }
        }
    }
}
