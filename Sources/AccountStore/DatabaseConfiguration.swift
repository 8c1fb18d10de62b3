import Foundation
import NIOSSL
import PostgresNIO

/// `SIWA_DATABASE_URL`, e.g. `postgres://siwa:secret@db.internal:5432/siwa?sslmode=require`.
public struct DatabaseConfiguration: Sendable {
    public enum TLSMode: String, Sendable { case disable, prefer, require }

    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    public var tls: TLSMode
    public var maximumConnections: Int
    /// PostgreSQL's `lock_timeout` for every statement on these connections
    /// (nil: the server's, normally none).
    public var lockTimeout: String?

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
        let sslmode = components.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "prefer"
        switch sslmode {
        case "disable": tls = .disable
        case "prefer", "allow": tls = .prefer
        case "require", "verify-ca", "verify-full": tls = .require
        default: throw DatabaseConfigurationError("has an unknown sslmode '\(sslmode)' (disable, prefer or require)")
        }
        self.maximumConnections = maximumConnections
    }

    /// The same server, another database (tests make one per suite).
    public func with(database: String) -> DatabaseConfiguration {
        var copy = self
        copy.database = database
        return copy
    }

    public var postgresClientConfiguration: PostgresClient.Configuration {
        let tlsConfiguration: PostgresClient.Configuration.TLS = switch tls {
        case .disable: .disable
        case .prefer: .prefer(.makeClientConfiguration())
        case .require: .require(.makeClientConfiguration())
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tlsConfiguration
        )
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = .seconds(5)
        configuration.options.additionalStartupParameters = [("application_name", "siwa")]
        if let lockTimeout { configuration.options.additionalStartupParameters.append(("lock_timeout", lockTimeout)) }
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

    /// For logs: never the password.
    public var redactedDescription: String { "postgres://\(username)@\(host):\(port)/\(database)" }
}

public struct DatabaseConfigurationError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
