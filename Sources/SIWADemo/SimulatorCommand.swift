import AppleSimulator
import ArgumentParser
import Crypto
import Foundation
import Logging
import UnixSignals
#if canImport(Glibc)
import Glibc
#endif

/// `siwa-demo simulator`: the Apple simulator alone, as a long-running
/// process, for what plays Apple from outside a Swift process: the
/// development image's simulator (`deploy/compose.yaml`) and the container
/// tests. Never part of the production image.
struct SimulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simulator",
        abstract: "Run the Apple simulator alone (development only): JWKS, /auth/token, /auth/revoke and the simulator's own routes.",
        discussion: """
            Serves what siwa calls at Apple (GET /auth/keys, POST /auth/token, /auth/revoke) and two \
            routes of its own for people and scripts playing the app and Apple: \
            POST /simulator/authorize (what Apple hands an app at sign-in, a body /v1/sign-in takes) \
            and POST /simulator/notify?type=TYPE&sub=SUB&client_id=ID (a signed server-to-server \
            notification, POSTed to --notify-url; answers the status siwa gave).

            The team's Sign in with Apple key is kept in --keys-dir as AuthKey_<KEY ID>.p8, made \
            there when missing and reused after a restart, so siwa serve and siwa worker can read it \
            (SIWA_APPLE_PRIVATE_KEY_FILE) with SIWA_APPLE_TEAM_ID and SIWA_APPLE_KEY_ID set to \
            --team-id and --key-id, and SIWA_APPLE_BASE_URL and SIWA_APPLE_JWKS_URL pointing here. \
            Apple's notification keys are made anew at each start. Stops on SIGTERM or SIGINT.
            """
    )

    // One option, not --host and --port: siwa-demo's own --port would take the latter.
    @Option(help: "HOST:PORT to listen on (0.0.0.0:8090 in a container; port 0: a free one, printed).")
    var listen = "127.0.0.1:8090"

    @Option(help: "Where the team's key is kept (AuthKey_<key id>.p8, mode 0600; made when missing).")
    var keysDir: String

    @Option(help: "The team id the key belongs to.")
    var teamID = "DEMOTEAM01"

    @Option(help: "The key id.")
    var keyID = "DEMOKEY001"

    @Option(help: "siwa serve's notification endpoint: where /simulator/notify and each revocation's consent-revoked go.")
    var notifyURL: String?

    /// `listen`, split: the host before the last colon, the port after it.
    var address: (host: String, port: Int)? {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]),
              (0...65535).contains(port), colon != listen.startIndex else { return nil }
        return (String(listen[..<colon]), port)
    }

    func validate() throws {
        if address == nil { throw ValidationError("--listen must be HOST:PORT, e.g. 0.0.0.0:8090") }
        if let notifyURL, URL(string: notifyURL)?.scheme != "http" {
            throw ValidationError("--notify-url must be an http:// URL (the simulator posts over plain HTTP)")
        }
    }

    func run() async throws {
        let apple = try AppleSimulator()
        let keyFile = URL(fileURLWithPath: keysDir).appendingPathComponent("AuthKey_\(keyID).p8")
        let key = try Self.teamKey(at: keyFile)
        apple.registerClient(teamID: teamID, keyID: keyID, publicKey: key.publicKey)
        apple.setNotificationEndpoint(notifyURL.flatMap(URL.init(string:)))
        let (host, port) = address ?? ("127.0.0.1", 8090)
        let server = try await apple.start(host: host, port: port, logger: Logger(label: "apple-simulator"))
        print("Apple simulator on \(host):\(server.port); team \(teamID), key \(keyID) at \(keyFile.path)"
              + (notifyURL.map { "; notifications to \($0)" } ?? ""))
        fflush(nil)
        let signals = await UnixSignalsSequence(trapping: [.sigint, .sigterm])
        for await _ in signals { break }
        await server.stop()
    }

    /// The key in `file`, or a new one written there first.
    static func teamKey(at file: URL) throws -> P256.Signing.PrivateKey {
        if let pem = try? String(contentsOf: file, encoding: .utf8) {
            return try P256.Signing.PrivateKey(pemRepresentation: pem)
        }
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        let key = P256.Signing.PrivateKey()
        let partial = file.appendingPathExtension("partial")
        guard FileManager.default.createFile(atPath: partial.path, contents: Data((key.pemRepresentation + "\n").utf8),
                                             attributes: [.posixPermissions: 0o600]) else {
            throw ValidationError("--keys-dir: cannot write \(partial.path)")
        }
        guard rename(partial.path, file.path) == 0 else { throw ValidationError("--keys-dir: cannot write \(file.path)") }
        return key
    }
}
