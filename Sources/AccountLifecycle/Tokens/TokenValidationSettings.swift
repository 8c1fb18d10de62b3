/// Token validation's own settings (TokenValidator, and the period that
/// sign-in and the queue schedule a token's first check by); read from
/// SIWA_* in SIWAConfiguration.
public struct TokenValidationSettings: Sendable {
    /// Hours between two checks of one token; nil: validation is off.
    public var periodHours: Int?
    /// Validation calls to Apple per second (on the worker that leads maintenance); nil: no cap.
    public var requestsPerSecond: Int?
    /// Validation pauses past this many `invalid_grant` answers in the last 100.
    public var invalidGrantPausePercent: Int

    public init(periodHours: Int? = 24, requestsPerSecond: Int? = 20, invalidGrantPausePercent: Int = 20) {
        self.periodHours = periodHours
        self.requestsPerSecond = requestsPerSecond
        self.invalidGrantPausePercent = invalidGrantPausePercent
    }

    /// For the start-up log.
    public var describe: String {
        guard let periodHours else { return "off (SIWA_REFRESH_VALIDATION_HOURS=0)" }
        return "every \(periodHours) h, at most \(requestsPerSecond.map { "\($0) calls/s" } ?? "uncapped")"
    }
}
