import Foundation
import Hummingbird

extension AppleSimulator {
    /// `POST /simulator/notify?type=TYPE&sub=SUB&client_id=ID[&email=E][&is_private_email=true|false]`:
    /// signs a server-to-server notification as Apple would and POSTs it to
    /// the notification endpoint (`setNotificationEndpoint`), then answers
    /// `{"status": CODE}` with the status siwa answered. For scripts that
    /// play Apple from outside the process, such as the container tests and
    /// the compose file's session (`deploy/compose.yaml`). Not an Apple
    /// endpoint: the simulator's own. 502 when nothing answered.
    func addNotifyRoute(to router: Router<SimulatorRequestContext>) {
        router.post("/simulator/notify") { request, _ -> Response in
            let query = request.uri.queryParameters
            let types: Set = ["email-disabled", "email-enabled", "consent-revoked", "account-delete", "account-deleted"]
            guard let type = query["type"].map(String.init), types.contains(type) else {
                return Self.json(.badRequest, ["error": "type must be one of \(types.sorted().joined(separator: ", "))"])
            }
            guard let sub = query["sub"].map(String.init), !sub.isEmpty, sub.count <= 255,
                  let clientID = query["client_id"].map(String.init), !clientID.isEmpty else {
                return Self.json(.badRequest, ["error": "sub and client_id are required query parameters"])
            }
            let isPrivateEmail: Bool?
            switch query["is_private_email"].map(String.init) {
            case nil: isPrivateEmail = nil
            case "true": isPrivateEmail = true
            case "false": isPrivateEmail = false
            default: return Self.json(.badRequest, ["error": "is_private_email must be true or false"])
            }
            guard let endpoint = self.tokenState.withLock({ $0.notificationEndpoint }) else {
                return Self.json(.conflict, ["error": "no notification endpoint is set (siwa-demo simulator --notify-url)"])
            }
            do {
                let token = try self.notification(type: type, sub: sub, audience: clientID,
                                                  email: query["email"].map(String.init), isPrivateEmail: isPrivateEmail)
                let status = try await NotificationPoster.post(Self.body(for: token), to: endpoint)
                return Self.json(.ok, ["status": status])
            } catch {
                return Self.json(.badGateway, ["error": "\(endpoint) did not answer: \(error)"])
            }
        }
    }
}
