import AccountEvents
import Foundation

/// A setting that is missing or malformed; start-up stops with this one line.
public struct SettingError: Error, CustomStringConvertible, Sendable {
    public let name: String
    public let problem: String
    public init(_ name: String, _ problem: String) {
        self.name = name
        self.problem = problem
    }
    public var description: String { "\(name): \(problem)" }
}

/// Reads `SIWA_*` settings from the environment with clear errors.
public struct Environment: Sendable {
    public let values: [String: String]

    public init(_ values: [String: String] = ProcessInfo.processInfo.environment) { self.values = values }

    public func string(_ name: String) -> String? {
        guard let value = values[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    public func required(_ name: String, example: String) throws -> String {
        guard let value = string(name) else { throw SettingError(name, "is required (e.g. \(name)=\(example))") }
        return value
    }

    public func integer(_ name: String, default value: Int, range: ClosedRange<Int>) throws -> Int {
        guard let text = string(name) else { return value }
        guard let number = Int(text), range.contains(number) else {
            throw SettingError(name, "expected a whole number in \(range.lowerBound)...\(range.upperBound), got '\(text.prefix(40))'")
        }
        return number
    }

    public func seconds(_ name: String, default value: Double, range: ClosedRange<Double>) throws -> Double {
        guard let text = string(name) else { return value }
        guard let number = Double(text), number.isFinite, range.contains(number) else {
            throw SettingError(name, "expected a number of seconds in \(range.lowerBound)...\(range.upperBound), got '\(text.prefix(40))'")
        }
        return number
    }

    public func url(_ name: String, default value: String) throws -> String {
        let text = string(name) ?? value
        guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil else {
            throw SettingError(name, "expected an http(s) URL, got '\(text.prefix(80))'")
        }
        return text
    }

    public func choice(_ name: String, default value: String, among choices: [String]) throws -> String {
        let text = string(name)?.lowercased() ?? value
        guard choices.contains(text) else {
            throw SettingError(name, "expected one of \(choices.joined(separator: ", ")), got '\(text.prefix(40))'")
        }
        return text
    }
}

/// Everything `siwa serve` is configured with.
public struct ServerSettings: Sendable {
    public var databaseURL: String
    public var databaseMaxConnections: Int
    public var host: String
    public var port: Int
    public var clientIDs: Set<String>
    public var jwksURL: String
    public var appleBaseURL: String
    public var jwksRefreshInterval: Double
    public var jwksRefetchCooldown: Double
    public var maxBodyBytes: Int
    /// Seconds a connection may stay idle (no request, or a request whose
    /// head or body stopped arriving) before the server closes it.
    public var httpIdleTimeout: Double
    public var ingestWriters: Int
    public var ingestMaxBatch: Int
    public var ingestTimeout: Double
    public var onConsentRevoked: ConsentRevokedPolicy
    public var rejectionsPerMinute: Int
    public var rejectionRetentionDays: Int
    /// The worker's SIWA_JOB_MAX_RUN_SECONDS: `/metrics` counts running jobs
    /// older than this as overdue.
    public var jobMaxRunSeconds: Double
    public var log: LogSettings

    public static let appleJWKSURL = "https://appleid.apple.com/auth/keys"
    public static let appleBaseURL = "https://appleid.apple.com"

    public init(environment env: Environment) throws {
        databaseURL = try env.required("SIWA_DATABASE_URL", example: "postgres://siwa:secret@127.0.0.1:5432/siwa")
        databaseMaxConnections = try env.integer("SIWA_DATABASE_MAX_CONNECTIONS", default: 20, range: 2...500)
        host = env.string("SIWA_HTTP_HOST") ?? "127.0.0.1"
        port = try env.integer("SIWA_HTTP_PORT", default: 8080, range: 0...65535)
        let ids = try env.required("SIWA_APPLE_CLIENT_IDS", example: "com.example.app,com.example.web")
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !ids.isEmpty else { throw SettingError("SIWA_APPLE_CLIENT_IDS", "lists no client id") }
        clientIDs = Set(ids)
        jwksURL = try env.url("SIWA_APPLE_JWKS_URL", default: Self.appleJWKSURL)
        appleBaseURL = try env.url("SIWA_APPLE_BASE_URL", default: Self.appleBaseURL)
        jwksRefreshInterval = try env.seconds("SIWA_APPLE_JWKS_REFRESH_SECONDS", default: 3600, range: 10...86400)
        jwksRefetchCooldown = try env.seconds("SIWA_APPLE_JWKS_REFETCH_COOLDOWN_SECONDS", default: 30, range: 0.1...3600)
        maxBodyBytes = try env.integer("SIWA_MAX_BODY_BYTES", default: 64 * 1024, range: 1024...(1024 * 1024))
        httpIdleTimeout = try env.seconds("SIWA_HTTP_IDLE_TIMEOUT_SECONDS", default: 60, range: 0.1...3600)
        ingestWriters = try env.integer("SIWA_INGEST_WRITERS", default: 4, range: 1...64)
        ingestMaxBatch = try env.integer("SIWA_INGEST_MAX_BATCH", default: 64, range: 1...1000)
        ingestTimeout = try env.seconds("SIWA_INGEST_TIMEOUT_SECONDS", default: 10, range: 0.1...120)
        onConsentRevoked = ConsentRevokedPolicy(rawValue: try env.choice(
            "SIWA_ON_CONSENT_REVOKED", default: ConsentRevokedPolicy.signOut.rawValue,
            among: ConsentRevokedPolicy.allCases.map(\.rawValue))) ?? .signOut
        rejectionsPerMinute = try env.integer("SIWA_REJECTIONS_PER_MINUTE", default: 6_000, range: 0...1_000_000)
        rejectionRetentionDays = try env.integer("SIWA_REJECTION_RETENTION_DAYS", default: 30, range: 1...3650)
        jobMaxRunSeconds = try WorkerSettings.maxRunSeconds(
            env, leaseSeconds: try env.seconds("SIWA_JOB_LEASE_SECONDS", default: 60, range: 1...86400))
        log = try LogSettings(environment: env)
        guard ingestWriters < databaseMaxConnections else {
            throw SettingError("SIWA_INGEST_WRITERS", "must be below SIWA_DATABASE_MAX_CONNECTIONS (\(databaseMaxConnections))")
        }
    }
}

public struct LogSettings: Sendable {
    public enum Format: String, Sendable { case json, text }
    public var format: Format
    public var level: String

    public init(format: Format = .text, level: String = "info") {
        self.format = format
        self.level = level
    }

    public init(environment env: Environment) throws {
        format = Format(rawValue: try env.choice("SIWA_LOG_FORMAT", default: "text", among: ["json", "text"])) ?? .text
        level = try env.choice("SIWA_LOG_LEVEL", default: "info",
                               among: ["trace", "debug", "info", "notice", "warning", "error", "critical"])
    }
}
