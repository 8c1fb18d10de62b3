/// The client ids that are web clients (Services IDs used by Sign in with
/// Apple JS, or on Android), and the Return URLs registered for them with
/// Apple when the operator listed them (SIWA_APPLE_WEB_CLIENT_IDS).
///
/// Apple binds a web client's authorization code to the `redirect_uri` of
/// the authorization request and refuses an exchange without it, or with
/// another, as `invalid_grant`: a refusal that says nothing of why. What
/// siwa can tell before calling Apple, it refuses with a reason that helps.
public struct WebClients: Sendable, Equatable {
    /// Per web client id, its Return URLs; an empty set: not listed (any
    /// `redirect_uri` is passed on to Apple, which judges it).
    public let returnURLs: [String: Set<String>]

    public init(returnURLs: [String: Set<String>] = [:]) {
        self.returnURLs = returnURLs
    }

    public func isWebClient(_ clientID: String) -> Bool { returnURLs[clientID] != nil }

    /// The refusal of an exchange Apple would refuse (nil: ask Apple).
    func refusal(clientID: String, redirectURI: String?) -> SignInOutcome? {
        guard let urls = returnURLs[clientID] else { return nil }
        guard let redirectURI else {
            return .refused(reason: "redirect_uri_required",
                            detail: "\(clientID) is a web client (SIWA_APPLE_WEB_CLIENT_IDS): Apple exchanges its code only with the redirect_uri the code was issued for; send it")
        }
        guard urls.isEmpty || urls.contains(redirectURI) else {
            return .refused(reason: "redirect_uri_required",
                            detail: "redirect_uri is not a Return URL SIWA_APPLE_WEB_CLIENT_IDS lists for \(clientID), so Apple issued no code for it; send the redirect_uri of the authorization request")
        }
        return nil
    }
}
