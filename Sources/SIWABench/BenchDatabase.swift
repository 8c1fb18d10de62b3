import Foundation

/// A database of its own for one benchmark scenario, on the bench cluster
/// (scripts/testdb.sh), migrated by the release `siwa migrate` as the
/// schema's owner; siwa serve and worker connect as their own runtime
/// roles, as in production.
struct BenchDatabase {
    let name: String
    /// The owner's URL: set-up, preloading, pgbench, counts.
    let ownerURL: String
    /// serve's role's URL (`siwa_serve`, created by scripts/testdb.sh).
    let serveURL: String
    /// The worker's role's URL (`siwa_worker`, created by scripts/testdb.sh).
    let workerURL: String
    private let serverURL: String

    static let serveUser = "siwa_serve"
    static let workerUser = "siwa_worker"

    /// - Parameter serverURL: the owner's URL to any database of the cluster.
    static func create(serverURL: String, label: String) async throws -> BenchDatabase {
        guard var components = URLComponents(string: serverURL) else { throw BenchError("not a URL: \(serverURL)") }
        let name = "bench_\(label)_\(Int(Date().timeIntervalSince1970))"
        _ = try await Shell.run("psql", ["-q", serverURL, "-c", "CREATE DATABASE \(name)"])
        components.path = "/\(name)"
        let ownerURL = components.string ?? serverURL
        func url(of user: String) -> String {
            var roleComponents = components
            roleComponents.user = user
            roleComponents.password = user
            return roleComponents.string ?? serverURL
        }
        let database = BenchDatabase(name: name, ownerURL: ownerURL, serveURL: url(of: serveUser), workerURL: url(of: workerUser),
                                     serverURL: serverURL)
        var environment = ProcessInfo.processInfo.environment
        environment["SIWA_MIGRATE_DATABASE_URL"] = ownerURL
        environment["SIWA_SERVE_ROLE"] = serveUser
        environment["SIWA_WORKER_ROLE"] = workerUser
        environment["SIWA_LOG_LEVEL"] = "warning"
        _ = try await Shell.run(siwaBinary(), ["migrate"], environment: environment)
        return database
    }

    func drop() async {
        _ = try? await Shell.run("psql", ["-q", serverURL, "-c", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)"])
    }

    /// One value from a query, as the owner.
    func scalar(_ sql: String) async throws -> String {
        try await Shell.run("psql", ["-qtA", ownerURL, "-c", sql]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Milliseconds the server took for `sql`, by psql's timing (the
    /// statement's round trip alone, not psql's start).
    func timedMilliseconds(_ sql: String) async throws -> Double {
        let output = try await Shell.run("psql", ["-qtA", ownerURL, "-c", "\\timing on", "-c", sql])
        // "Time: 207.713 ms"
        guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("Time: ") }),
              let value = Double(line.dropFirst(6).prefix { $0 != " " }) else {
            throw BenchError("psql printed no time for \(sql):\n\(output)")
        }
        return value
    }

    /// The release `siwa` next to siwa-bench.
    static func siwaBinary() throws -> String {
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("siwa").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw BenchError("\(binary) is missing: run `swift build -c release` first (make bench does)")
        }
        return binary
    }
}
