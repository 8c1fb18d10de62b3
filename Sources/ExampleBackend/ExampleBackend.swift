import Foundation
import Hummingbird
import Logging

/// An app's backend built on SIWAClient: the way to start with siwa
/// (docs/client.md). The iOS app posts Apple's credential to
/// `POST /auth/apple`; the backend signs the user in through siwa's `/v1`
/// and mints its own session; siwa's app events arrive at
/// `POST /siwa/events`, verified, and end sessions and data as each event
/// asks. Storage is in memory: a real backend keeps users, sessions and the
/// seen event ids in its database.
///
/// Settings, from the environment:
///   EXAMPLE_API_URL         siwa's API listener (e.g. http://127.0.0.1:8082)
///   EXAMPLE_API_KEY         an app key: `siwa api-keys create example-backend`
///   EXAMPLE_WEBHOOK_SECRET  siwa's SIWA_APP_WEBHOOK_SECRET (whsec_...)
///   EXAMPLE_HOST, EXAMPLE_PORT   where to listen (127.0.0.1:8090)
@main
struct ExampleBackend {
    static func main() async throws {
        let logger = Logger(label: "example-backend")
        let settings: ExampleSettings
        do {
            settings = try ExampleSettings(environment: ProcessInfo.processInfo.environment)
        } catch {
            FileHandle.standardError.write(Data("siwa-example-backend: \(error)\n".utf8))
            exit(2)
        }
        let app = try buildExampleApplication(settings: settings, logger: logger)
        try await app.runService()
    }
}

struct ExampleSettings: Sendable {
    var apiURL: URL
    var apiKey: String
    var webhookSecret: String
    var host = "127.0.0.1"
    var port = 8090

    struct Missing: Error, CustomStringConvertible {
        let description: String
    }

    init(environment: [String: String]) throws {
        func required(_ name: String) throws -> String {
            guard let value = environment[name], !value.isEmpty else { throw Missing(description: "\(name) is not set") }
            return value
        }
        guard let url = URL(string: try required("EXAMPLE_API_URL")), url.scheme == "http" || url.scheme == "https" else {
            throw Missing(description: "EXAMPLE_API_URL is not an http(s) URL")
        }
        apiURL = url
        apiKey = try required("EXAMPLE_API_KEY")
        webhookSecret = try required("EXAMPLE_WEBHOOK_SECRET")
        if let host = environment["EXAMPLE_HOST"] { self.host = host }
        if let port = environment["EXAMPLE_PORT"] {
            guard let number = Int(port), (0...65535).contains(number) else { throw Missing(description: "EXAMPLE_PORT is not a port") }
            self.port = number
        }
    }
}
