import Foundation
import Hummingbird

extension AppleSimulator {
    /// `POST /simulator/authorize?sub=SUB&client_id=ID[&email=E][&nonce=N]`:
    /// what Apple hands an app when a user signs in, for trying siwa with
    /// curl (`make try`). The answer is `{"identity_token", "authorization_code"}`,
    /// a body `POST /v1/sign-in` takes as it is. Not an Apple endpoint: the
    /// simulator's own, for people and scripts playing the app.
    func addAuthorizeRoute(to router: Router<SimulatorRequestContext>) {
        router.post("/simulator/authorize") { request, _ -> Response in
            let query = request.uri.queryParameters
            guard let sub = query["sub"].map(String.init), !sub.isEmpty, sub.count <= 255,
                  let clientID = query["client_id"].map(String.init), !clientID.isEmpty else {
                return Self.json(.badRequest, ["error": "sub and client_id are required query parameters"])
            }
            let email = query["email"].map(String.init)
            let nonce = query["nonce"].map(String.init)
            do {
                let token = try self.identityToken(sub: sub, audience: clientID, email: email, nonce: nonce)
                let code = self.issueAuthorizationCode(sub: sub, clientID: clientID, email: email,
                                                       isPrivateEmail: email.map { $0.hasSuffix("privaterelay.appleid.com") },
                                                       nonce: nonce)
                return Self.json(.ok, ["identity_token": token, "authorization_code": code])
            } catch {
                return Self.json(.internalServerError, ["error": "could not sign: \(error)"])
            }
        }
    }
}
