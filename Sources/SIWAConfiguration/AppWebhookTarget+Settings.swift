import AccountLifecycle
import AccountStore
import Crypto
import Foundation

/// The app events webhook's settings are its delivery target: on when
/// SIWA_APP_WEBHOOK_URL is set (with its secret), off when neither is; a
/// secret without a URL, a URL that is not http(s) or a secret that is not
/// a Standard Webhooks one stops start-up with one line naming the setting.
extension AppWebhookTarget {
    /// nil when the webhook is off.
    public static func read(_ env: SettingsReader) throws -> AppWebhookTarget? {
        typealias S = SettingsCatalog
        guard let text = env.string(S.appWebhookURL) else {
            for setting in [S.appWebhookSecret, S.appWebhookSecretNext] where try env.optional(setting) != nil {
                throw SettingError(setting.name, "is set but SIWA_APP_WEBHOOK_URL is not (the webhook needs both)")
            }
            return nil
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
              url.host?.isEmpty == false else {
            throw SettingError(S.appWebhookURL.name, "expected an http(s) URL, got '\(text.prefix(80))'")
        }
        guard let secret = try env.optional(S.appWebhookSecret) else {
            throw SettingError(S.appWebhookSecret.name, "is required when SIWA_APP_WEBHOOK_URL is set (e.g. the output of `siwa webhooks secret`)")
        }
        var keys = [try key(secret, S.appWebhookSecret)]
        if let next = try env.optional(S.appWebhookSecretNext) { keys.append(try key(next, S.appWebhookSecretNext)) }
        let includeEmail = try env.choice(S.appWebhookIncludeEmail) == "true"
        return AppWebhookTarget(url: url, keys: keys, timeoutSeconds: try env.number(S.appWebhookTimeout), includeEmail: includeEmail)
    }

    /// Never quotes the secret back.
    private static func key(_ secret: String, _ setting: Setting) throws -> SymmetricKey {
        do { return try StandardWebhook.strictKey(fromSecret: secret) } catch let error as WebhookSecretError {
            throw SettingError(setting.name, error.description)
        }
    }

    /// For logs: the URL without a user or password it may carry.
    public var redactedURL: String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url.host ?? "?" }
        components.user = nil
        components.password = nil
        components.query = nil
        return components.string ?? (url.host ?? "?")
    }
}
