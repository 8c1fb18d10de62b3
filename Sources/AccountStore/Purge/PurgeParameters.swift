import Foundation

/// A `purge_user` job's arguments, as `siwa.enqueue_purge` (sql/008, 015)
/// writes them. Other keys it writes (`jti`, `tokens_before`, `rerun_of`,
/// `api_key`) are read by the purge's SQL, not here.
public struct PurgeParameters: JobParameters, Equatable {
    public static let kind = "purge_user"

    public var appleSub: String?
    /// The team of `appleSub`.
    public var appleTeam: String?
    /// The event that asked for it (`account-delete`, `app-deletion`, ...).
    public var eventType: String?
    /// `tokens`: a consent revocation under `sign_out`; only the user's
    /// Apple tokens are revoked and deleted, their data stays.
    public var scope: String?
    /// A grace delay's end (siwa.utc_iso's form): the data waits until then.
    public var purgeAfter: String?

    enum CodingKeys: String, CodingKey {
        case appleSub = "apple_sub"
        case appleTeam = "apple_team"
        case eventType = "event_type"
        case scope
        case purgeAfter = "purge_after"
    }

    /// The argument `JobQueue.snooze` reads the grace delay's end from.
    public static let purgeAfterKey = CodingKeys.purgeAfter.rawValue

    public init(appleSub: String?, appleTeam: String?, eventType: String? = nil, scope: String? = nil, purgeAfter: String? = nil) {
        self.appleSub = appleSub
        self.appleTeam = appleTeam
        self.eventType = eventType
        self.scope = scope
        self.purgeAfter = purgeAfter
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        appleSub = container.text(.appleSub)
        appleTeam = container.text(.appleTeam)
        eventType = container.text(.eventType)
        scope = container.text(.scope)
        purgeAfter = container.text(.purgeAfter)
    }

    /// A sign-out (`scope` `tokens`), not a purge of the data.
    public var tokensOnly: Bool { scope == "tokens" }
}

/// An `app_event` job's arguments, as `siwa.app_event_args` (sql/014)
/// writes them. The delivery's claim builds the body from them in SQL
/// (ClaimAppEventsStatement); the runner reads none.
public struct AppEventParameters: JobParameters, Equatable {
    public static let kind = "app_event"

    public var appleSub: String?
    public var eventType: String?

    enum CodingKeys: String, CodingKey {
        case appleSub = "apple_sub"
        case eventType = "event_type"
    }

    public init(appleSub: String?, eventType: String?) {
        self.appleSub = appleSub
        self.eventType = eventType
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        appleSub = container.text(.appleSub)
        eventType = container.text(.eventType)
    }
}
