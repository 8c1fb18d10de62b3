import AccountLifecycle
import SIWAConfiguration

extension SignInRequirement {
    /// SIWA_SIGN_IN_REQUIRES: read whether sign-in is on or not, so a bad
    /// value is refused either way.
    public init(reader: SettingsReader) throws {
        self = SignInRequirement(rawValue: try reader.choice(SettingsCatalog.signInRequires)) ?? .code
    }
}
