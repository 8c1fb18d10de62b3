import AccountLifecycle
import Foundation

/// SIWA_APPLE_CLIENTS_FILE: the clients of several apps and teams, JSON.
///
///     {
///       "teams": {
///         "ABCDE12345": {"key_id": "XYZ987WVU6", "private_key_file": "/etc/siwa/AuthKey_XYZ987WVU6.p8"}
///       },
///       "clients": {
///         "com.example.app": {"team": "ABCDE12345"},
///         "com.example.web": {"team": "ABCDE12345", "web": true,
///                             "return_urls": ["https://example.com/auth/apple/callback"]},
///         "com.acquired.app": {"team": "FGHIJ67890", "key_id": "KLMNO12345",
///                              "private_key_file": "/etc/siwa/AuthKey_KLMNO12345.p8"}
///       }
///     }
///
/// A client's key is its own (`key_id` and `private_key_file`) or its
/// team's (under `teams`); without any, the client has none (sign-in off,
/// SignInSettings says whether that is allowed). An unknown name anywhere
/// is refused: a typo would otherwise drop a key or a web flag silently.
enum AppleClientsFile {
    struct Problem: Error {
        let text: String
        init(_ text: String) { self.text = text }
    }

    struct KeyEntry: Decodable {
        let keyID: String
        let privateKeyFile: String
        enum CodingKeys: String, CodingKey, CaseIterable {
            case keyID = "key_id", privateKeyFile = "private_key_file"
        }
    }

    struct ClientEntry: Decodable {
        let team: String
        let keyID: String?
        let privateKeyFile: String?
        let web: Bool?
        let returnURLs: [String]?
        enum CodingKeys: String, CodingKey, CaseIterable {
            case team, keyID = "key_id", privateKeyFile = "private_key_file", web, returnURLs = "return_urls"
        }
    }

    struct Document: Decodable {
        let teams: [String: KeyEntry]?
        let clients: [String: ClientEntry]
        enum CodingKeys: String, CodingKey, CaseIterable { case teams, clients }
    }

    /// The file's largest sensible size: a few hundred clients.
    static let maximumBytes = 1 << 20

    static func read(path: String) throws(Problem) -> AppleClientsSettings {
        let data: Data
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            if let size = attributes[.size] as? Int, size > maximumBytes { throw Problem("larger than \(maximumBytes) bytes") }
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch let problem as Problem {
            throw problem
        } catch {
            throw Problem("cannot be read (missing, or not readable by this user)")
        }
        return try parse(data)
    }

    static func parse(_ data: Data) throws(Problem) -> AppleClientsSettings {
        try checkNames(data)
        let document: Document
        do {
            document = try JSONDecoder().decode(Document.self, from: data)
        } catch let DecodingError.keyNotFound(key, context) {
            throw Problem("\(where_(context.codingPath)) lacks \"\(key.stringValue)\"")
        } catch let DecodingError.typeMismatch(_, context) {
            throw Problem("\(where_(context.codingPath)) has the wrong type")
        } catch {
            throw Problem("is not JSON of the documented shape (an object with \"clients\", and \"teams\" if keys are shared)")
        }
        guard !document.clients.isEmpty else { throw Problem("\"clients\" lists nothing") }
        var teamKeys: [String: ClientKeyFile] = [:]
        for (team, entry) in document.teams ?? [:] {
            guard SignInSettings.isAppleIdentifier(team) else {
                throw Problem("teams: '\(team.prefix(40))' is no team id (10 upper-case letters and digits)")
            }
            teamKeys[team] = try key(team: team, keyID: entry.keyID, path: entry.privateKeyFile, at: "teams.\(team)")
        }
        var teams: [String: String] = [:]
        var keys: [String: ClientKeyFile] = [:]
        var returnURLs: [String: Set<String>] = [:]
        for (clientID, entry) in document.clients.sorted(by: { $0.key < $1.key }) {
            let at = "clients.\(clientID.prefix(80))"
            guard !clientID.isEmpty, clientID.utf8.count <= 255, clientID.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
                throw Problem("clients: '\(clientID.prefix(80))' is no client id (a bundle id or Services ID)")
            }
            guard SignInSettings.isAppleIdentifier(entry.team) else {
                throw Problem("\(at).team: expected 10 upper-case letters and digits, got '\(entry.team.prefix(40))'")
            }
            teams[clientID] = entry.team
            switch (entry.keyID, entry.privateKeyFile) {
            case (let keyID?, let path?): keys[clientID] = try key(team: entry.team, keyID: keyID, path: path, at: at)
            case (nil, nil): if let shared = teamKeys[entry.team] { keys[clientID] = shared }
            default: throw Problem("\(at): key_id and private_key_file go together")
            }
            if entry.returnURLs != nil && entry.web != true {
                throw Problem("\(at): return_urls is for a web client (\"web\": true)")
            }
            if entry.web == true {
                let urls = entry.returnURLs ?? []
                if let bad = urls.first(where: { !WebClients.isReturnURL($0) }) {
                    throw Problem("\(at).return_urls: '\(bad.prefix(80))' is no https Return URL")
                }
                returnURLs[clientID] = Set(urls)
            }
        }
        if let unused = teamKeys.keys.sorted().first(where: { !teams.values.contains($0) }) {
            throw Problem("teams.\(unused): no client is in that team")
        }
        return AppleClientsSettings(clients: AppleClients(teams: teams, web: WebClients(returnURLs: returnURLs)),
                                    keys: keys, oneTeamKey: nil)
    }

    private static func key(team: String, keyID: String, path: String, at: String) throws(Problem) -> ClientKeyFile {
        guard SignInSettings.isAppleIdentifier(keyID) else {
            throw Problem("\(at).key_id: expected 10 upper-case letters and digits, got '\(keyID.prefix(40))'")
        }
        guard path.hasPrefix("/") else { throw Problem("\(at).private_key_file: expected an absolute path") }
        return ClientKeyFile(team: team, keyID: keyID, path: path)
    }

    private static func where_(_ path: [any CodingKey]) -> String {
        path.isEmpty ? "the file" : path.map(\.stringValue).joined(separator: ".")
    }

    /// Every object's names are ones the shape knows.
    private static func checkNames(_ data: Data) throws(Problem) {
        let outline: Outline
        do { outline = try JSONDecoder().decode(Outline.self, from: data) } catch {
            throw Problem("is not a JSON object")
        }
        func refuse(_ names: [String], known: [String], at: String) throws(Problem) {
            if let unknown = names.sorted().first(where: { !known.contains($0) }) {
                throw Problem("\(at)\"\(unknown.prefix(40))\" is not a known name (known: \(known.joined(separator: ", ")))")
            }
        }
        try refuse(outline.names, known: Document.CodingKeys.allCases.map(\.rawValue), at: "")
        for (team, names) in outline.teams { try refuse(names, known: KeyEntry.CodingKeys.allCases.map(\.rawValue), at: "teams.\(team.prefix(40)): ") }
        for (client, names) in outline.clients {
            try refuse(names, known: ClientEntry.CodingKeys.allCases.map(\.rawValue), at: "clients.\(client.prefix(80)): ")
        }
    }

    /// The file's names only: the top level's, and each team's and client's.
    private struct Outline: Decodable {
        let names: [String]
        let teams: [String: [String]]
        let clients: [String: [String]]

        struct Name: CodingKey {
            let stringValue: String
            init(stringValue: String) { self.stringValue = stringValue }
            var intValue: Int? { nil }
            init?(intValue: Int) { nil }
        }

        struct Names: Decodable {
            let names: [String]
            init(from decoder: any Decoder) throws {
                names = try decoder.container(keyedBy: Name.self).allKeys.map(\.stringValue)
            }
        }

        init(from decoder: any Decoder) throws {
            let top = try decoder.container(keyedBy: Name.self)
            names = top.allKeys.map(\.stringValue)
            teams = try top.decodeIfPresent([String: Names].self, forKey: Name(stringValue: "teams"))?.mapValues(\.names) ?? [:]
            clients = try top.decodeIfPresent([String: Names].self, forKey: Name(stringValue: "clients"))?.mapValues(\.names) ?? [:]
        }
    }
}
