import Foundation
import Logging
import NIOSSL
import PostgresNIO

/// `SIWA_DATABASE_URL`, e.g.
/// `postgres://siwa_app:secret@db.internal:5432/siwa?sslmode=verify-full&sslrootcert=/etc/siwa/db-ca.pem`.
///
/// TLS follows libpq's `sslmode` (https://www.postgresql.org/docs/current/libpq-ssl.html):
///
/// | sslmode | TLS | server certificate |
/// | --- | --- | --- |
/// | `disable` | never | - |
/// | `prefer` (default; `allow` is taken as `prefer`) | if the server offers it, else plain text | checked against `sslrootcert` when given (chain only), else not checked |
/// | `require` | always; no TLS, no connection | checked against `sslrootcert` when given (chain only, as libpq does), else not checked: encrypted, but not authenticated |
/// | `verify-ca` | always | chain checked against `sslrootcert`, else the system's CAs; the name is not checked |
/// | `verify-full` | always | chain and host name (or IP address) checked |
///
/// `prefer` is no protection: anyone in the path can answer "no TLS". Only
/// `require`, `verify-ca` and `verify-full` guarantee TLS, and they never
/// fall back to plain text; only `verify-full` (or `verify-ca` with a CA of
/// your own) makes sure it is your server at the other end.
public struct DatabaseConfiguration: Sendable {
    public enum TLSMode: String, Sendable, CaseIterable {
        case disable, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var tls: TLSMode
    /// `sslrootcert`: the PEM file of the CA(s) the server's certificate must chain to.
    public private(set) var caFile: String?
    /// The certificates read from `caFile` when the configuration was made
    /// (so a missing or bad file stops start-up, not the first query).
    public private(set) var caCertificates: [NIOSSLCertificate]
    public var maximumConnections: Int
    /// Limits every session of the pool sets at start-up (none: the
    /// server's, normally no limit).
    public var sessionLimits = SessionLimits()

    /// The URL's query parameters siwa understands; any other `ssl*`
    /// parameter is refused (silently ignoring, say, `sslcert` would leave a
    /// deploy less protected than its URL says).
    public static let queryParameters = ["sslmode", "sslrootcert"]

    public init(url: String, maximumConnections: Int = 20) throws {
        guard let components = URLComponents(string: url),
              let scheme = components.scheme, ["postgres", "postgresql"].contains(scheme) else {
            throw DatabaseConfigurationError("must look like postgres://USER:PASSWORD@HOST:PORT/DATABASE")
        }
        guard let host = components.host, !host.isEmpty else { throw DatabaseConfigurationError("has no host") }
        guard let user = components.user, !user.isEmpty else { throw DatabaseConfigurationError("has no user name") }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty else { throw DatabaseConfigurationError("has no database name") }
        self.host = host
        self.port = components.port ?? 5432
        self.username = user.removingPercentEncoding ?? user
        self.password = components.password.map { $0.removingPercentEncoding ?? $0 }
        self.database = database
        let query = components.queryItems ?? []
        for item in query where item.name.lowercased().hasPrefix("ssl") && !Self.queryParameters.contains(item.name) {
            throw DatabaseConfigurationError("has \(item.name), which siwa does not support (TLS parameters: sslmode, sslrootcert)")
        }
        func value(_ name: String) throws -> String? {
            let values = query.filter { $0.name == name }
            guard values.count <= 1 else { throw DatabaseConfigurationError("has \(name) twice") }
            guard let item = values.first else { return nil }
            guard let value = item.value, !value.isEmpty else { throw DatabaseConfigurationError("has an empty \(name)") }
            return value
        }
        let sslmode = try value("sslmode") ?? "prefer"
        switch sslmode {
        case "disable": tls = .disable
        case "allow", "prefer": tls = .prefer
        case "require": tls = .require
        case "verify-ca": tls = .verifyCA
        case "verify-full": tls = .verifyFull
        default:
            throw DatabaseConfigurationError("has an unknown sslmode '\(sslmode.prefix(40))' (disable, prefer, require, verify-ca or verify-full)")
        }
        caFile = try value("sslrootcert")
        caCertificates = []
        if let caFile {
            guard tls != .disable else {
                throw DatabaseConfigurationError("has sslrootcert but sslmode=disable turns TLS off; drop one of them")
            }
            caCertificates = try Self.readCertificates(caFile)
        }
        self.maximumConnections = maximumConnections
    }

    /// The CA file's certificates, or one clear line saying why not.
    static func readCertificates(_ path: String) throws -> [NIOSSLCertificate] {
        guard path.hasPrefix("/") else {
            throw DatabaseConfigurationError("sslrootcert=\(path): give an absolute path")
        }
        let bytes: Data
        do {
            bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            let reason = (error as NSError).userInfo[NSUnderlyingErrorKey].map { "\($0)" } ?? error.localizedDescription
            throw DatabaseConfigurationError("sslrootcert=\(path): cannot read the CA file (\(Self.shortReason(reason, path: path)))")
        }
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMBytes(Array(bytes))
        } catch {
            throw DatabaseConfigurationError("sslrootcert=\(path): not a PEM file of CA certificates")
        }
        guard !certificates.isEmpty else {
            throw DatabaseConfigurationError("sslrootcert=\(path): holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        return certificates
    }

    private static func shortReason(_ reason: String, path: String) -> String {
        if !FileManager.default.fileExists(atPath: path) { return "no such file" }
        if !FileManager.default.isReadableFile(atPath: path) { return "permission denied" }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue { return "a directory" }
        return String(reason.prefix(120)).replacingOccurrences(of: "\n", with: " ")
    }

    /// The same server, another database (tests make one per suite).
    public func with(database: String) -> DatabaseConfiguration {
        var copy = self
        copy.database = database
        return copy
    }

    /// What the TLS handshake checks, per `sslmode` and `sslrootcert`.
    public var tlsConfiguration: TLSConfiguration? {
        guard tls != .disable else { return nil }
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        if !caCertificates.isEmpty { configuration.trustRoots = .certificates(caCertificates) }
        switch tls {
        case .disable:
            return nil
        case .prefer, .require:
            // libpq: without a root certificate, encryption only; with one,
            // the chain is checked (not the name).
            configuration.certificateVerification = caCertificates.isEmpty ? .none : .noHostnameVerification
        case .verifyCA:
            configuration.certificateVerification = .noHostnameVerification
        case .verifyFull:
            configuration.certificateVerification = .fullVerification
        }
        return configuration
    }

    /// One line for the logs and the docs: what this configuration protects.
    public var tlsDescription: String {
        let roots = caFile.map { "the CA in \($0)" } ?? "the system's CAs"
        switch tls {
        case .disable: return "sslmode=disable: no TLS"
        case .prefer:
            return caFile == nil
                ? "sslmode=prefer: TLS if the server offers it, certificate not checked (no protection against an active attacker)"
                : "sslmode=prefer: TLS if the server offers it, certificate chain checked against \(roots)"
        case .require:
            return caFile == nil
                ? "sslmode=require: TLS always, certificate not checked (encrypted, not authenticated)"
                : "sslmode=require: TLS always, certificate chain checked against \(roots) (host name not checked)"
        case .verifyCA: return "sslmode=verify-ca: TLS always, certificate chain checked against \(roots) (host name not checked)"
        case .verifyFull: return "sslmode=verify-full: TLS always, certificate chain checked against \(roots) and host name \(host)"
        }
    }

    public var postgresClientConfiguration: PostgresClient.Configuration {
        let tlsConfiguration: PostgresClient.Configuration.TLS = switch (tls, self.tlsConfiguration) {
        case (.disable, _), (_, nil): .disable
        case (.prefer, let configuration?): .prefer(configuration)
        case (.require, let configuration?), (.verifyCA, let configuration?), (.verifyFull, let configuration?): .require(configuration)
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tlsConfiguration
        )
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.additionalStartupParameters = [("application_name", "siwa")]
        configuration.options.additionalStartupParameters += sessionLimits.startupParameters
        return configuration
    }

    /// Runs `body` with a client on this database that runs beside it and
    /// stops when it returns: for commands, tools and tests that connect once.
    public func withClient<T: Sendable>(_ body: (PostgresClient) async throws -> T) async throws -> T {
        let client = PostgresClient(configuration: postgresClientConfiguration)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    /// Opens one connection and closes it again, throwing the reason it
    /// fails at once. (A `PostgresClient` pool retries failed connections
    /// quietly, so a refused TLS handshake would look like a database that
    /// never answers.)
    public func probe(logger: Logger) async throws {
        let connection = try await PostgresConnection.connect(configuration: try connectionConfiguration(), id: 0, logger: logger)
        try? await connection.close()
    }

    /// One connection of its own, outside any pool (the probe's; the
    /// maintenance lock's session, `MaintenanceLock`), with the pool's TLS,
    /// connect timeout and session limits, and `extraParameters` (start-up
    /// parameters: application_name, keepalives).
    public func connectionConfiguration(extraParameters: [(String, String)] = []) throws -> PostgresConnection.Configuration {
        let connectionTLS: PostgresConnection.Configuration.TLS
        switch (tls, tlsConfiguration) {
        case (.disable, _), (_, nil): connectionTLS = .disable
        case (.prefer, let configuration?): connectionTLS = .prefer(try NIOSSLContext(configuration: configuration))
        case (.require, let configuration?), (.verifyCA, let configuration?), (.verifyFull, let configuration?):
            connectionTLS = .require(try NIOSSLContext(configuration: configuration))
        }
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: connectionTLS
        )
        configuration.options.connectTimeout = .seconds(5)
        let names = Set(extraParameters.map(\.0))
        configuration.options.additionalStartupParameters = ([("application_name", "siwa")] + sessionLimits.startupParameters)
            .filter { !names.contains($0.0) } + extraParameters
        return configuration
    }

    /// Whether `error` is TLS refusing to connect (no TLS on the server
    /// under require/verify-*, a certificate that does not check out): a
    /// setting to fix, not an outage to wait out.
    public static func isTLSFailure(_ error: any Error) -> Bool {
        if error is NIOSSLError || error is NIOSSLExtraError || error is BoringSSLError { return true }
        guard let error = error as? PSQLError else { return false }
        switch error.code {
        case .sslUnsupported, .failedToAddSSLHandler, .receivedUnencryptedDataAfterSSLRequest: return true
        default: return error.underlying.map(isTLSFailure) ?? false
        }
    }

    /// For logs: never the password.
    public var redactedDescription: String { "postgres://\(username)@\(host):\(port)/\(database)" }

    /// Why a connection failed, in one line an operator can act on: TLS
    /// refusals say which side and which sslmode, a server that cannot be
    /// reached says where and what failed (`ConnectionFailure`), the
    /// server's own message otherwise.
    public func describe(connectionError error: any Error) -> String {
        if !Self.isTLSFailure(error),
           let unreachable = ConnectionFailure.describe(error, host: host, port: port, connectTimeout: "5 s") {
            return unreachable
        }
        if let error = error as? PSQLError {
            switch error.code {
            case .sslUnsupported:
                return "the server at \(host):\(port) does not offer TLS, and sslmode=\(tls.rawValue) requires it (siwa never falls back to plain text)"
            case .server:
                return error.serverInfo?[.message] ?? "the server refused (\(error.code))"
            default:
                if let underlying = error.underlying {
                    return Self.isTLSFailure(underlying) ? tlsFailure(underlying) : "\(error.code): \(String("\(underlying)".prefix(300)))"
                }
                return Self.isTLSFailure(error) ? tlsFailure(error) : "\(error.code)"
            }
        }
        return Self.isTLSFailure(error) ? tlsFailure(error) : String("\(error)".prefix(300))
    }

    private func tlsFailure(_ error: any Error) -> String {
        let text = "\(error)"
        let reason: String
        if text.contains("failedToValidateHostname") {
            reason = "the server's certificate does not name \(host) (verify-full checks the URL's host name or IP address)"
        } else if text.contains("CERTIFICATE_VERIFY_FAILED") {
            reason = tls == .verifyFull
                ? "the server's certificate does not chain to \(caFile ?? "the system's CAs") or does not name \(host)"
                : "the server's certificate does not chain to \(caFile ?? "the system's CAs")"
        } else {
            reason = String(text.prefix(300))
        }
        return "TLS to \(host):\(port) failed (sslmode=\(tls.rawValue)): \(reason)"
    }
}

public struct DatabaseConfigurationError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
