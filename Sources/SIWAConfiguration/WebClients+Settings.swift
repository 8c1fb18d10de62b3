import AccountLifecycle
import AccountStore
import Foundation

extension WebClients {
    /// SIWA_APPLE_WEB_CLIENT_IDS: `ID` or `ID=RETURN_URL` entries, each id
    /// one of `audiences` (SIWA_APPLE_CLIENT_IDS); unset: no web client.
    public init(reader: SettingsReader, audiences: Set<String>) throws {
        let setting = SettingsCatalog.appleWebClientIDs
        guard let text = reader.string(setting) else {
            self.init()
            return
        }
        var returnURLs: [String: Set<String>] = [:]
        let entries = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !entries.isEmpty else { throw SettingError(setting.name, "lists nothing") }
        for entry in entries {
            let parts = entry.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            let id = parts[0]
            guard audiences.contains(id) else {
                throw SettingError(setting.name, "'\(id.prefix(80))' is not in SIWA_APPLE_CLIENT_IDS (a web client id must be an accepted client id too)")
            }
            if returnURLs[id] == nil { returnURLs[id] = [] }
            guard parts.count == 2 else { continue }
            let url = parts[1]
            guard Self.isReturnURL(url) else {
                throw SettingError(setting.name, "expected ID or ID=https://RETURN-URL, got '\(entry.prefix(80))'")
            }
            returnURLs[id, default: []].insert(url)
        }
        self.init(returnURLs: returnURLs)
    }

    /// Apple registers only https Return URLs with a domain name.
    static func isReturnURL(_ url: String) -> Bool {
        guard url.utf8.count <= 2048, let components = URLComponents(string: url), components.scheme == "https",
              let host = components.host else { return false }
        return !host.isEmpty
    }
}
