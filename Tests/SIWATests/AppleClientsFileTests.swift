import AccountLifecycle
import AccountStore
import Foundation
import SIWAConfiguration
import Testing

/// SIWA_APPLE_CLIENTS_FILE (several apps and teams): what it says, and every
/// mistake in it stops start-up with one line naming the file, the place
/// and what is wrong.
@Suite("Apple clients file")
struct AppleClientsFileTests {
    static func settings(_ json: String, extra: [String: String] = [:]) throws -> AppleClientsSettings {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-clients-\(UUID().uuidString).json").path
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try AppleClientsSettings.read(SettingsReader(["SIWA_APPLE_CLIENTS_FILE": path].merging(extra) { $1 }))
    }

    static func refusal(_ json: String, extra: [String: String] = [:]) -> String {
        do {
            _ = try settings(json, extra: extra)
            return "accepted"
        } catch {
            // The file's path varies; the rest is the message.
            return "\(error)".replacing(#/\/tmp\/siwa-clients-[0-9A-F-]+\.json: /#, with: "")
        }
    }

    @Test func eachClientHasItsTeamItsKeyAndItsWebFlag() throws {
        let parsed = try Self.settings("""
            {"teams": {"ABCDE12345": {"key_id": "XYZ987WVU6", "private_key_file": "/etc/siwa/a.p8"}},
             "clients": {"com.example.app": {"team": "ABCDE12345"},
                         "com.example.web": {"team": "ABCDE12345", "web": true, "return_urls": ["https://example.com/cb"]},
                         "com.other.app": {"team": "FGHIJ67890", "key_id": "KLMNO12345", "private_key_file": "/etc/siwa/b.p8"},
                         "com.keyless.app": {"team": "PQRST24680"}}}
            """)
        #expect(parsed.clients.audiences == ["com.example.app", "com.example.web", "com.other.app", "com.keyless.app"])
        #expect(parsed.clients.team(of: "com.other.app") == "FGHIJ67890" && parsed.clients.team(of: "com.nope") == nil)
        #expect(parsed.clients.allTeams == ["ABCDE12345", "FGHIJ67890", "PQRST24680"])
        #expect(parsed.key(for: "com.example.web") == ClientKeyFile(team: "ABCDE12345", keyID: "XYZ987WVU6", path: "/etc/siwa/a.p8"))
        #expect(parsed.key(for: "com.other.app") == ClientKeyFile(team: "FGHIJ67890", keyID: "KLMNO12345", path: "/etc/siwa/b.p8"))
        #expect(parsed.key(for: "com.keyless.app") == nil && parsed.oneTeamKey == nil)
        #expect(parsed.clients.web == WebClients(returnURLs: ["com.example.web": ["https://example.com/cb"]]))
    }

    @Test(arguments: [
        (#"{"clients": {"a": {"team": "ABCDE12345", "wbe": true}}}"#,
         #"SIWA_APPLE_CLIENTS_FILE: clients.a: "wbe" is not a known name (known: team, key_id, private_key_file, web, return_urls)"#),
        (#"{"client": {}}"#, #"SIWA_APPLE_CLIENTS_FILE: "client" is not a known name (known: teams, clients)"#),
        (#"{"clients": {}}"#, #"SIWA_APPLE_CLIENTS_FILE: "clients" lists nothing"#),
        (#"{"clients": {"a": {"team": "abc"}}}"#, "SIWA_APPLE_CLIENTS_FILE: clients.a.team: expected 10 upper-case letters and digits, got 'abc'"),
        (#"{"clients": {"a": {}}}"#, #"SIWA_APPLE_CLIENTS_FILE: clients.a lacks "team""#),
        (#"{"clients": {"a": {"team": "ABCDE12345", "key_id": "XYZ987WVU6"}}}"#,
         "SIWA_APPLE_CLIENTS_FILE: clients.a: key_id and private_key_file go together"),
        (#"{"clients": {"a": {"team": "ABCDE12345", "key_id": "XYZ987WVU6", "private_key_file": "k.p8"}}}"#,
         "SIWA_APPLE_CLIENTS_FILE: clients.a.private_key_file: expected an absolute path"),
        (#"{"clients": {"a": {"team": "ABCDE12345", "return_urls": ["https://a.example/cb"]}}}"#,
         #"SIWA_APPLE_CLIENTS_FILE: clients.a: return_urls is for a web client ("web": true)"#),
        (#"{"clients": {"a": {"team": "ABCDE12345", "web": true, "return_urls": ["http://a.example/cb"]}}}"#,
         "SIWA_APPLE_CLIENTS_FILE: clients.a.return_urls: 'http://a.example/cb' is no https Return URL"),
        (#"{"teams": {"FGHIJ67890": {"key_id": "XYZ987WVU6", "private_key_file": "/k.p8"}}, "clients": {"a": {"team": "ABCDE12345"}}}"#,
         "SIWA_APPLE_CLIENTS_FILE: teams.FGHIJ67890: no client is in that team"),
        (#"{"clients": {"a b": {"team": "ABCDE12345"}}}"#, "SIWA_APPLE_CLIENTS_FILE: clients: 'a b' is no client id (a bundle id or Services ID)"),
        ("[1, 2]", "SIWA_APPLE_CLIENTS_FILE: is not a JSON object"),
    ])
    func aMistakeIsOneLine(_ json: String, _ message: String) {
        #expect(Self.refusal(json) == message)
    }

    /// The file replaces the one team's settings; both at once is a mistake.
    @Test func theOneTeamSettingsAreRefusedBesideIt() {
        #expect(Self.refusal(#"{"clients": {"a": {"team": "ABCDE12345"}}}"#, extra: ["SIWA_APPLE_CLIENT_IDS": "a"])
                == "SIWA_APPLE_CLIENT_IDS: set it in SIWA_APPLE_CLIENTS_FILE instead: with the clients file set, SIWA_APPLE_TEAM_ID, SIWA_APPLE_CLIENT_IDS, SIWA_APPLE_WEB_CLIENT_IDS, SIWA_APPLE_KEY_ID, SIWA_APPLE_PRIVATE_KEY_FILE must be unset")
        let missing = AppleClientsSettings.self
        #expect(throws: SettingError.self) { try missing.read(SettingsReader(["SIWA_APPLE_CLIENTS_FILE": "/nonexistent/clients.json"])) }
    }

    /// With the key ring set (sign-in on), every client needs a key; without
    /// it, keys in the file are a mistake too (half a sign-in).
    @Test func signInNeedsAKeyForEveryClient() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-clients-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data(#"{"teams": {"ABCDE12345": {"key_id": "XYZ987WVU6", "private_key_file": "/k.p8"}}, "clients": {"a": {"team": "ABCDE12345"}, "b": {"team": "FGHIJ67890"}}}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        #expect {
            try SignInSettings.read(SettingsReader(["SIWA_APPLE_CLIENTS_FILE": path, "SIWA_TOKEN_ENCRYPTION_KEYS_FILE": "/ring"]))
        } throws: { error in
            "\(error)".hasPrefix("SIWA_APPLE_CLIENTS_FILE: client b has no key")
        }
        #expect {
            try SignInSettings.read(SettingsReader(["SIWA_APPLE_CLIENTS_FILE": path]))
        } throws: { error in
            "\(error)".hasPrefix("SIWA_TOKEN_ENCRYPTION_KEYS_FILE: is required when SIWA_APPLE_CLIENTS_FILE gives keys")
        }
        try Data(#"{"clients": {"a": {"team": "ABCDE12345"}}}"#.utf8).write(to: URL(fileURLWithPath: path))
        #expect(try SignInSettings.read(SettingsReader(["SIWA_APPLE_CLIENTS_FILE": path])) == nil, "no keys, no ring: sign-in off")
    }
}
