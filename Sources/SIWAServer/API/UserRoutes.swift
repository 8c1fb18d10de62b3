import AccountLifecycle
import AccountStore
import Foundation
import Hummingbird
import Logging
import Tracing

/// The API the app's backend calls (`/v1`, each request with an API key):
/// sign-in, a user's record, and in-app account deletion. Exists only when
/// sign-in is configured.
struct UserRoutes: Sendable {
    let signIn: SignInService
    let directory: UserDirectory
    let apiKeys: APIKeyVerifier
    let maxBodyBytes: Int
    let logger: Logger

    /// Where Apple's users revoke an app's access by hand (TN3194: when the
    /// app holds no token to revoke, the user does it at their Apple
    /// Account: Sign-In and Security > Sign in with Apple).
    static let manualRevocationURL = "https://support.apple.com/en-us/102571"

    func register(on router: Router<BasicRequestContext>) {
        let v1 = router.group("v1", context: APIKeyContext.self).add(middleware: APIKeyMiddleware(verifier: apiKeys))
        v1.post("sign-in") { request, context in
            // Inside the request's server span (TracingMiddleware); the calls
            // to Apple it makes are spans of their own inside it.
            await withSpan("siwa.sign_in") { span in
                RequestLogContext.tag(span)
                let response = await signIn(request, apiKey: context.apiKey?.name ?? "")
                span.attributes["http.response.status_code"] = Int(response.status.code)
                return response
            }
        }
        v1.get("users/:sub") { request, context in
            switch team(of: request) {
            case .success(let team): await show(context.parameters.get("sub") ?? "", team: team)
            case .failure(let refusal): refusal.response
            }
        }
        v1.delete("users/:sub") { request, context in
            switch team(of: request) {
            case .success(let team): await delete(context.parameters.get("sub") ?? "", team: team, apiKey: context.apiKey?.name ?? "")
            case .failure(let refusal): refusal.response
            }
        }
    }

    struct TeamRefusal: Error {
        let response: Response
    }

    /// The team whose user `/v1/users/{sub}` names (Apple's subs are
    /// team-scoped): `?team=`, else the team of `?client_id=`, else the one
    /// team siwa serves. With several, the caller must say.
    func team(of request: Request) -> Result<String, TeamRefusal> {
        Self.team(of: request, clients: signIn.clients)
    }

    /// As above, for every `/v1` route that names a team (the events feed too).
    static func team(of request: Request, clients: AppleClients) -> Result<String, TeamRefusal> {
        let query = request.uri.queryParameters
        if let team = query["team"].map(String.init) {
            guard clients.allTeams.contains(team) else {
                return .failure(TeamRefusal(response: APIResponse.error(.badRequest, "unknown_team", "team is not a team of this siwa's clients")))
            }
            return .success(team)
        }
        if let clientID = query["client_id"].map(String.init) {
            guard let team = clients.team(of: clientID) else {
                return .failure(TeamRefusal(response: APIResponse.error(.badRequest, "unknown_client", "client_id is not one of this siwa's clients")))
            }
            return .success(team)
        }
        let teams = clients.allTeams
        guard teams.count == 1 else {
            return .failure(TeamRefusal(response: APIResponse.error(
                .badRequest, "team_required", "this siwa serves several teams (Apple's subs are team-scoped): name the user's with ?team= or ?client_id=")))
        }
        return .success(teams[0])
    }

    private func signIn(_ request: Request, apiKey: String) async -> Response {
        let body: SignInRequest
        do {
            let buffer = try await request.body.collect(upTo: maxBodyBytes)
            body = try JSONDecoder().decode(SignInRequest.self, from: Data(buffer.readableBytesView))
        } catch {
            return APIResponse.error(.badRequest, "malformed_request",
                                     "the body must be JSON {\"identity_token\"?, \"authorization_code\"?, \"client_id\"?, \"nonce\"?, \"redirect_uri\"?, \"user\"?} of at most \(maxBodyBytes) bytes")
        }
        return SignInAnswer(await signIn.signIn(body.attempt, apiKeyName: apiKey)).response
    }

    private func show(_ sub: String, team: String) async -> Response {
        guard APIResponse.isPlausibleSub(sub) else { return APIResponse.error(.notFound, "not_found", "no such user") }
        do {
            guard let user = try await directory.user(appleSub: sub, team: team) else {
                // Moved to another team's sub in an app transfer (docs/app-transfer.md).
                if let moved = try await directory.newSub(movedFrom: sub) {
                    return JSONResponse.make(.ok, ["apple_sub": sub, "moved_to": moved.sub, "moved_to_team": moved.team])
                }
                return APIResponse.error(.notFound, "not_found", "no such user")
            }
            return JSONResponse.encoded(.ok, UserAnswer(user: user))
        } catch {
            return unavailable(error)
        }
    }

    private func delete(_ sub: String, team: String, apiKey: String) async -> Response {
        guard APIResponse.isPlausibleSub(sub) else { return APIResponse.error(.notFound, "not_found", "no such user") }
        do {
            guard let scheduled = try await directory.scheduleDeletion(appleSub: sub, team: team, apiKeyName: apiKey) else {
                return APIResponse.error(.notFound, "not_found", "no such user")
            }
            if scheduled.alreadyPurged {
                return JSONResponse.encoded(.ok, DeletionAnswer(status: "deleted", jobID: scheduled.jobID, jobState: scheduled.state,
                                                                appleRevocation: nil, appleRevocationURL: nil))
            }
            // No token to revoke: Apple still lists the app for the user
            // until they remove it themselves.
            return JSONResponse.encoded(.accepted, DeletionAnswer(
                status: "deletion_scheduled", jobID: scheduled.jobID, jobState: scheduled.state,
                appleRevocation: scheduled.willRevoke ? "scheduled" : "manual",
                appleRevocationURL: scheduled.willRevoke ? nil : Self.manualRevocationURL))
        } catch {
            return unavailable(error)
        }
    }

    private func unavailable(_ error: any Error) -> Response {
        logger.warning("A /v1 request could not reach the database", metadata: ["error": "\(safeDescription(error))"])
        var response = APIResponse.error(.serviceUnavailable, "unavailable", "the database is unavailable; retry later")
        response.headers[.retryAfter] = "5"
        return response
    }
}
