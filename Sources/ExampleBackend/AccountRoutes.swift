import Foundation
import Hummingbird
import Logging
import SIWAClient

/// What the iOS app calls: sign-in with Apple's credential, the signed-in
/// user, and the in-app account deletion the App Store requires.
struct AccountRoutes: Sendable {
    let siwa: SIWAClient
    let accounts: Accounts
    let logger: Logger

    /// What the app posts: what `ASAuthorizationAppleIDCredential` gave it,
    /// in the names siwa's `/v1/sign-in` takes (the identity token and
    /// authorization code as UTF-8 strings of Apple's Data, the raw nonce
    /// whose SHA-256 it put in Apple's request, and at the first
    /// authorization only the name and email, as Apple's `user` object).
    struct AppleCredential: Decodable {
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
        var user: User?
    }

    struct SessionAnswer: Encodable {
        let session: String
        let userId: Int64
        let isNewUser: Bool
    }

    struct MeAnswer: Encodable {
        let userId: Int64
        let appleSub: String
        let email: String?
        let emailDeliverable: Bool
    }

    func register(on router: Router<BasicRequestContext>) {
        router.post("auth/apple") { request, _ in
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            let body = try await request.body.collect(upTo: 64 * 1024)
            guard let credential = try? decoder.decode(AppleCredential.self, from: Data(buffer: body)) else {
                return json(.badRequest, ErrorBody(error: "malformed_credential"))
            }
            return await signIn(credential)
        }
        router.get("me") { request, _ in
            guard let (session, user) = signedIn(request) else { return json(.unauthorized, ErrorBody(error: "sign_in_required")) }
            return json(.ok, MeAnswer(userId: session.userID, appleSub: session.user.sub, email: user.email,
                                      emailDeliverable: user.emailDeliverable))
        }
        router.delete("me") { request, _ in
            guard let (session, _) = signedIn(request) else { return json(.unauthorized, ErrorBody(error: "sign_in_required")) }
            return await deleteAccount(session.user)
        }
    }

    private func signIn(_ credential: AppleCredential) async -> Response {
        let user = credential.user.map { user in
            Components.Schemas.AppleUserObject(
                name: user.name.map { .init(firstName: $0.firstName, lastName: $0.lastName) }, email: user.email)
        }
        let request = SIWAClient.SignInRequest(identityToken: credential.identityToken, authorizationCode: credential.authorizationCode,
                                    nonce: credential.nonce, user: user.map { .AppleUserObject($0) })
        do {
            let user = try await siwa.signIn(request)
            let key = Accounts.UserKey(sub: user.appleSub, team: user.team)
            let token = accounts.startSession(for: key, userID: user.userId, email: user.email)
            return json(.ok, SessionAnswer(session: token, userId: user.userId, isNewUser: user.isNewUser))
        } catch let refusal as SIWARefusal {
            return answer(refusal)
        } catch {
            logger.error("siwa did not answer the sign-in", metadata: ["error": "\(error)"])
            return json(.serviceUnavailable, ErrorBody(error: "unavailable"))
        }
    }

    /// The user deleted their account in the app: siwa revokes their Apple
    /// tokens and purges; the backend ends their sessions now and treats
    /// the account as gone (the events `user.deletion_requested` and
    /// `purge.completed` follow).
    private func deleteAccount(_ key: Accounts.UserKey) async -> Response {
        do {
            let deletion = try await siwa.deleteUser(appleSub: key.sub, in: .team(key.team))
            accounts.delete(key)
            // No token to revoke: the user must remove the app at their
            // Apple Account themselves; the app shows them this link.
            return json(.accepted, ["apple_revocation_url": deletion?.appleRevocationUrl])
        } catch let refusal as SIWARefusal {
            return answer(refusal)
        } catch {
            logger.error("siwa did not answer the deletion", metadata: ["error": "\(error)"])
            return json(.serviceUnavailable, ErrorBody(error: "unavailable"))
        }
    }

    /// siwa's refusals as the app should see them.
    private func answer(_ refusal: SIWARefusal) -> Response {
        switch (refusal.status, refusal.code) {
        case (400, _), (409, "stale_identity_token"):
            // The app asks Apple for a fresh credential (user interaction).
            return json(.unauthorized, ErrorBody(error: refusal.code))
        case (404, _): return json(.notFound, ErrorBody(error: refusal.code))
        case (409, _): return json(.conflict, ErrorBody(error: refusal.code))
        case (503, _): return json(.serviceUnavailable, ErrorBody(error: "unavailable"))
        default:
            // 401/403 (this backend's API key), 502 (siwa's Apple
            // credentials): the operator's to fix, not the user's.
            logger.error("siwa refused the backend", metadata: ["status": "\(refusal.status)", "error": "\(refusal.code)"])
            return json(.internalServerError, ErrorBody(error: "server_error"))
        }
    }

    private func signedIn(_ request: Request) -> (Accounts.Session, Accounts.User)? {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer "),
              let session = accounts.session(token: String(header.dropFirst(7))),
              let user = accounts.user(session.user) else { return nil }
        return (session, user)
    }
}
