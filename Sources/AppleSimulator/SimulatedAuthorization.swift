import Foundation
import Hummingbird

extension AppleSimulator {
    /// `POST /simulator/authorize?sub=SUB&client_id=ID[&email=E][&nonce=N][&given_name=G][&family_name=F]`:
    /// what Apple hands an app when a user signs in (`signIn`), for trying
    /// siwa with curl (`make try`). The answer is `{"identity_token",
    /// "authorization_code"}`, with `"user"` at the first authorization, a
    /// body `POST /v1/sign-in` takes as it is. Not an Apple endpoint: the
    /// simulator's own, for people and scripts playing the app.
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
            do {
                let signIn = try self.signIn(sub: sub, clientID: clientID, email: email, nonce: nonce,
                                             givenName: givenName, familyName: familyName)
                return Self.json(.ok, signIn.signInBody)
            } catch {
                return Self.json(.internalServerError, ["error": "could not sign: \(error)"])
            }
        }
    }
}
