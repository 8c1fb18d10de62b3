import AccountStore
import ChildProcesses
import Foundation
import NIOSSL
import PostgresNIO
import Testing

/// TLS to PostgreSQL with libpq's sslmode semantics, and sslrootcert.
@Suite("Database TLS", .testDatabases, .timeLimit(.minutes(10)))
struct DatabaseTLSTests {
    static let base = "postgres://siwa:secret@db.internal:5432/siwa"

    // MARK: parsing (no database)

    @Test(arguments: [
        ("", DatabaseConfiguration.TLSMode.prefer),
        ("?sslmode=disable", .disable),
        ("?sslmode=allow", .prefer),
        ("?sslmode=prefer", .prefer),
        ("?sslmode=require", .require),
        ("?sslmode=verify-ca", .verifyCA),
        ("?sslmode=verify-full", .verifyFull),
    ])
    func eachSSLModeParses(_ query: String, _ mode: DatabaseConfiguration.TLSMode) throws {
        let configuration = try DatabaseConfiguration(url: Self.base + query)
        #expect(configuration.tls == mode)
        #expect(configuration.caFile == nil)
        let tls = configuration.tlsConfiguration
        switch mode {
        case .disable:
            #expect(tls == nil)
        case .prefer, .require:
            // libpq: no root certificate, no check (encryption only).
            #expect(Self.verification(tls) == "none")
        case .verifyCA:
            #expect(Self.verification(tls) == "chain")
            #expect(tls?.trustRoots == nil || tls?.trustRoots == .default, "the system's CAs")
        case .verifyFull:
            #expect(Self.verification(tls) == "full")
        }
    }

    @Test func aCAFileMakesEveryTLSModeCheckTheChainAgainstIt() async throws {
        let directory = try Self.temporaryDirectory()
        let ca = try await CertificateAuthority.make(directory: directory, name: "unit")
        for (mode, expected) in [("prefer", "chain"), ("require", "chain"), ("verify-ca", "chain"), ("verify-full", "full")] {
            let configuration = try DatabaseConfiguration(url: "\(Self.base)?sslmode=\(mode)&sslrootcert=\(ca.certificateFile)")
            #expect(configuration.caFile == ca.certificateFile)
            #expect(configuration.caCertificates.count == 1)
            #expect(Self.verification(configuration.tlsConfiguration) == expected, "\(mode)")
            if case .certificates(let roots)? = configuration.tlsConfiguration?.trustRoots {
                #expect(roots == configuration.caCertificates)
            } else {
                Issue.record("\(mode): trust roots are not the CA file's")
            }
        }
    }

    @Test(arguments: [
        ("?sslmode=verify-everything", "has an unknown sslmode 'verify-everything' (disable, prefer, require, verify-ca or verify-full)"),
        ("?sslmode=", "has an empty sslmode"),
        ("?sslmode=require&sslmode=disable", "has sslmode twice"),
        ("?sslmode=require&sslcert=/etc/siwa/client.pem", "has sslcert, which siwa does not support (TLS parameters: sslmode, sslrootcert)"),
        ("?sslmode=disable&sslrootcert=/etc/siwa/ca.pem", "has sslrootcert but sslmode=disable turns TLS off; drop one of them"),
        ("?sslmode=verify-full&sslrootcert=ca.pem", "sslrootcert=ca.pem: give an absolute path"),
        ("?sslmode=verify-full&sslrootcert=/nonexistent/siwa-ca.pem", "sslrootcert=/nonexistent/siwa-ca.pem: cannot read the CA file (no such file)"),
        ("?sslmode=verify-full&sslrootcert=/tmp", "sslrootcert=/tmp: cannot read the CA file (a directory)"),
    ])
    func badTLSParametersAreRefusedWithOneClearReason(_ query: String, _ message: String) {
        #expect(throws: DatabaseConfigurationError.self) { try DatabaseConfiguration(url: Self.base + query) }
        do {
            _ = try DatabaseConfiguration(url: Self.base + query)
        } catch {
            #expect("\(error)" == message)
        }
    }

    @Test func aFileWithoutACertificateIsRefused() throws {
        let directory = try Self.temporaryDirectory()
        let file = directory.appendingPathComponent("not-a-ca.pem").path
        try "this is not a certificate\n".write(toFile: file, atomically: true, encoding: .utf8)
        do {
            _ = try DatabaseConfiguration(url: "\(Self.base)?sslmode=verify-full&sslrootcert=\(file)")
            Issue.record("accepted a file without a certificate")
        } catch {
            let text = "\(error)"
            #expect(text.hasPrefix("sslrootcert=\(file): "), "\(text)")
            #expect(text.contains("PEM"), "\(text)")
        }
    }

    // MARK: start-up: one line naming the setting

    @Test func siwaServeWorkerAndMigrateStopWithOneLineForAnUnreadableCAFile() async throws {
        let url = "postgres://siwa@127.0.0.1:5432/siwa?sslmode=verify-full&sslrootcert=/nonexistent/siwa-ca.pem"
        let expected = "sslrootcert=/nonexistent/siwa-ca.pem: cannot read the CA file (no such file)"
        let cases: [([String], [String: String], String)] = [
            (["serve"], ["SIWA_DATABASE_URL": url, "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "app"], "siwa: SIWA_DATABASE_URL: \(expected)"),
            (["worker"], ["SIWA_DATABASE_URL": url], "siwa: SIWA_DATABASE_URL: \(expected)"),
            (["migrate"], ["SIWA_MIGRATE_DATABASE_URL": url, "SIWA_DATABASE_URL": "postgres://siwa_app@127.0.0.1/siwa"],
             "siwa: SIWA_MIGRATE_DATABASE_URL: \(expected)"),
            (["jobs", "list"], ["SIWA_DATABASE_URL": url], "siwa: SIWA_DATABASE_URL: \(expected)"),
        ]
        for (arguments, environment, line) in cases {
            let result = try await runSIWA(arguments, environment: environment)
            #expect(result.status == 2, "\(arguments): \(result.output)")
            #expect(result.output == line + "\n", "\(arguments)")
        }
    }

    // MARK: a server without TLS (the test cluster has ssl off)

    @Test func requireNeverFallsBackToPlainTextAndPreferDoes() async throws {
        let database = try await TestDatabase.create()
        for mode in ["require", "verify-ca", "verify-full"] {
            let outcome = await Self.connect("\(database.url)?sslmode=\(mode)")
            #expect(outcome.error?.contains("does not offer TLS, and sslmode=\(mode) requires it") == true, "\(mode): \(outcome)")
        }
        #expect(await Self.connect("\(database.url)?sslmode=prefer").ssl == false)
        #expect(await Self.connect(database.url).ssl == false, "prefer is the default")
        #expect(await Self.connect("\(database.url)?sslmode=disable").ssl == false)

        // siwa serve and siwa worker say so in one line and stop (exit 2: a setting to fix).
        for command in ["serve", "worker"] {
            let result = try await runSIWA([command], environment: [
                "SIWA_DATABASE_URL": "\(database.serveURL)?sslmode=require", "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "app", "SIWA_HTTP_PORT": "0",
            ])
            #expect(result.status == 2, "\(command): \(result.output)")
            #expect(result.output == "siwa: SIWA_DATABASE_URL: postgres://\(TestDatabase.serveRole)@127.0.0.1:\(database.configuration.port)/"
                    + "\(database.configuration.database): the server at 127.0.0.1:\(database.configuration.port) does not offer TLS, "
                    + "and sslmode=require requires it (siwa never falls back to plain text)\n", "\(command)")
        }
        // And with prefer (the default) siwa serve runs, without TLS.
        let serve = try SIWAProcess(port: try freePort(), environment: [
            "SIWA_DATABASE_URL": database.serveURL, "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "app", "SIWA_APPLE_JWKS_URL": "http://127.0.0.1:9/keys",
        ])
        try await serve.waitForLog("Database")
        #expect(serve.log.contains("sslmode=prefer: TLS if the server offers it"), "\(serve.log)")
        _ = await serve.terminate()
    }

    // MARK: a server with TLS (a cluster of its own, with a CA made here)

    @Test func theModesAgainstARealTLSServer() async throws {
        let server = try await TLSCluster.start()
        let ca = server.ca
        let other = try await CertificateAuthority.make(directory: server.directory, name: "other")
        let viaIP = "postgres://siwa:siwa@127.0.0.1:\(server.port)/siwa"
        let viaName = "postgres://siwa:siwa@localhost:\(server.port)/siwa"

        // The certificate names localhost (no IP address).
        #expect(await Self.connect("\(viaName)?sslmode=verify-full&sslrootcert=\(ca.certificateFile)").ssl == true)
        let wrongName = await Self.connect("\(viaIP)?sslmode=verify-full&sslrootcert=\(ca.certificateFile)")
        #expect(wrongName.ssl == nil && wrongName.error?.contains("the server's certificate does not name 127.0.0.1") == true, "\(wrongName)")
        #expect(await Self.connect("\(viaIP)?sslmode=verify-ca&sslrootcert=\(ca.certificateFile)").ssl == true)
        // The chain is checked against the CA given, and without one against the system's.
        for url in ["\(viaName)?sslmode=verify-full&sslrootcert=\(other.certificateFile)",
                    "\(viaIP)?sslmode=verify-ca&sslrootcert=\(other.certificateFile)",
                    "\(viaIP)?sslmode=require&sslrootcert=\(other.certificateFile)",
                    "\(viaName)?sslmode=verify-full"] {
            let outcome = await Self.connect(url)
            #expect(outcome.ssl == nil && outcome.error?.contains("TLS") == true, "\(url): \(outcome)")
        }
        // require without a CA: encrypted, not checked (libpq); prefer takes TLS when offered.
        #expect(await Self.connect("\(viaIP)?sslmode=require").ssl == true)
        #expect(await Self.connect("\(viaIP)?sslmode=prefer").ssl == true)
        #expect(await Self.connect("\(viaIP)?sslmode=disable").ssl == false)

        // siwa migrate over verify-full, and its one line when the CA is wrong.
        let name = "tls_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
        _ = try await DatabaseConfiguration(url: "\(viaIP)?sslmode=disable").withClient { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: TestEnvironment.logger)
        }
        let owner = "postgres://siwa:siwa@localhost:\(server.port)/\(name)?sslmode=verify-full&sslrootcert=\(ca.certificateFile)"
        let runtime = "postgres://siwa_app@localhost:\(server.port)/\(name)?sslmode=verify-full&sslrootcert=\(ca.certificateFile)"
        let migrate = try await runSIWA(["migrate"], environment: ["SIWA_MIGRATE_DATABASE_URL": owner, "SIWA_DATABASE_URL": runtime])
        #expect(migrate.status == 0, "\(migrate.output)")
        #expect(migrate.output.contains("granted the serve privileges to siwa_serve"), "\(migrate.output)")
        let refused = try await runSIWA(["migrate", "--check"], environment: [
            "SIWA_MIGRATE_DATABASE_URL": owner.replacingOccurrences(of: ca.certificateFile, with: other.certificateFile),
            "SIWA_DATABASE_URL": runtime,
        ])
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.hasPrefix("siwa: SIWA_MIGRATE_DATABASE_URL: postgres://siwa@localhost:\(server.port)/\(name): TLS"),
                "\(refused.output)")
        #expect(refused.output.split(separator: "\n").count == 1, "\(refused.output)")
    }

    // MARK: helpers

    struct Outcome: CustomStringConvertible {
        /// Whether the session runs over TLS (pg_stat_ssl); nil if it failed.
        var ssl: Bool?
        var error: String?
        var description: String { ssl.map { "connected, ssl \($0)" } ?? "failed: \(error ?? "?")" }
    }

    /// Connects with `url`'s own TLS settings and asks the server whether
    /// the session is encrypted; gives up after 20 s.
    static func connect(_ url: String) async -> Outcome {
        let configuration: DatabaseConfiguration
        do { configuration = try DatabaseConfiguration(url: url, maximumConnections: 1) } catch {
            return Outcome(error: "\(error)")
        }
        do {
            // One connection first: it fails at once with the reason (the pool would retry quietly).
            try await configuration.probe(logger: TestEnvironment.logger)
            return try await withThrowingTaskGroup(of: Outcome.self) { group in
                group.addTask {
                    try await configuration.withClient { client in
                        let rows = try await client.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                                                          logger: TestEnvironment.logger)
                        for try await ssl in rows.decode(Bool.self) { return Outcome(ssl: ssl) }
                        return Outcome(error: "no pg_stat_ssl row")
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(20))
                    return Outcome(error: "timed out")
                }
                defer { group.cancelAll() }
                return try await group.next() ?? Outcome(error: "no result")
            }
        } catch {
            return Outcome(error: configuration.describe(connectionError: error))
        }
    }

    static func verification(_ tls: TLSConfiguration?) -> String {
        switch tls?.certificateVerification {
        case nil: "no TLS"
        case .none?: "none"
        case .noHostnameVerification?: "chain"
        case .fullVerification?: "full"
        }
    }

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// A throwaway CA (openssl), and server certificates it signs.
struct CertificateAuthority {
    let certificateFile: String
    let keyFile: String

    static func make(directory: URL, name: String) async throws -> CertificateAuthority {
        let ca = CertificateAuthority(certificateFile: directory.appendingPathComponent("\(name)-ca.crt").path,
                                      keyFile: directory.appendingPathComponent("\(name)-ca.key").path)
        let keyFile = ca.keyFile, certificateFile = ca.certificateFile
        try await Shell.run("""
            openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 2 -subj '/CN=siwa test CA \(name)' \
              -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign' \
              -keyout '\(keyFile)' -out '\(certificateFile)'
            """)
        return ca
    }

    /// A server certificate for `dnsName` (no IP address in it).
    func issueServerCertificate(dnsName: String, certificateFile: String, keyFile: String) async throws {
        try await Shell.run("""
            set -e
            openssl req -newkey rsa:2048 -nodes -sha256 -subj '/CN=\(dnsName)' -keyout '\(keyFile)' -out '\(keyFile).csr'
            printf 'subjectAltName=DNS:\(dnsName)\\nbasicConstraints=CA:FALSE\\nkeyUsage=critical,digitalSignature,keyEncipherment\\nextendedKeyUsage=serverAuth\\n' > '\(keyFile).ext'
            openssl x509 -req -sha256 -days 2 -in '\(keyFile).csr' -CA '\(self.certificateFile)' -CAkey '\(self.keyFile)' \
              -CAcreateserial -extfile '\(keyFile).ext' -out '\(certificateFile)'
            rm -f '\(keyFile).csr' '\(keyFile).ext'
            """)
    }
}

/// A cluster of its own (`scripts/testdb.sh start tls`), switched to TLS
/// with a certificate for `localhost` signed by a CA made for the run.
/// Its superuser `postgres` (trust on loopback) turns ssl on with ALTER
/// SYSTEM and a reload; the files live in the cluster's directory, so a
/// later start finds them.
struct TLSCluster {
    let port: Int
    let directory: URL
    let ca: CertificateAuthority

    static func start() async throws -> TLSCluster {
        let url = try await Shell.output("'\(TestEnvironment.pgScript)' start tls").trimmingCharacters(in: .whitespacesAndNewlines)
        let configuration = try DatabaseConfiguration(url: url)
        let root = ProcessInfo.processInfo.environment["SIWA_PG_ROOT"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp/siwa-pg"
        let clusterDirectory = URL(fileURLWithPath: root).appendingPathComponent("tls")
        let directory = clusterDirectory.appendingPathComponent("certs")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let ca = try await CertificateAuthority.make(directory: directory, name: "server")
        let certificate = directory.appendingPathComponent("server.crt").path
        let key = directory.appendingPathComponent("server.key").path
        try await ca.issueServerCertificate(dnsName: "localhost", certificateFile: certificate, keyFile: key)
        // The server runs as the owner of its data directory and wants its key private.
        try await Shell.run("""
            chmod 755 '\(directory.path)' && chmod 600 '\(key)' && chmod 644 '\(certificate)' && \
            chown --reference='\(clusterDirectory.path)/data' '\(directory.path)' '\(key)' '\(certificate)'
            """)
        let superuser = try configuration.superuser(database: "postgres")
        try await superuser.withClient { client in
            for statement in ["ALTER SYSTEM SET ssl_cert_file = '\(certificate)'", "ALTER SYSTEM SET ssl_key_file = '\(key)'",
                              "ALTER SYSTEM SET ssl = on", "SELECT pg_reload_conf()"] {
                try await client.query(PostgresQuery(unsafeSQL: statement), logger: TestEnvironment.logger)
            }
        }
        // The reload is asynchronous: wait until a new session sees ssl on.
        let ready = try await eventually(upTo: .seconds(10)) {
            await DatabaseTLSTests.connect("postgres://siwa:siwa@127.0.0.1:\(configuration.port)/siwa?sslmode=require").ssl == true
        }
        guard ready else { throw TestSetupError("the tls cluster did not turn TLS on (see \(clusterDirectory.path)/log)") }
        return TLSCluster(port: configuration.port, directory: directory, ca: ca)
    }
}

enum Shell {
    static func run(_ script: String) async throws {
        _ = try await output(script)
    }

    /// Runs `script` with /bin/sh; its stdout, or an error with its output.
    static func output(_ script: String) async throws -> String {
        let directory = FileManager.default.temporaryDirectory
        let out = directory.appendingPathComponent("siwa-sh-\(UUID().uuidString).out").path
        let err = directory.appendingPathComponent("siwa-sh-\(UUID().uuidString).err").path
        defer {
            try? FileManager.default.removeItem(atPath: out)
            try? FileManager.default.removeItem(atPath: err)
        }
        let child = try ChildProcess(executable: "/bin/sh", arguments: ["-c", "(\(script)) >'\(out)' 2>'\(err)'"],
                                     environment: ProcessInfo.processInfo.environment)
        let status = await child.wait()
        let stdout = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        guard status == 0 else {
            let stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
            throw TestSetupError("`\(script.prefix(200))` failed (\(status)): \(stderr.suffix(1000))")
        }
        return stdout
    }
}
