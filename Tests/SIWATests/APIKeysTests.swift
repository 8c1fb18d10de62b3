import AccountStore
import Crypto
import Foundation
import PostgresNIO
import Testing

/// `siwa api-keys` as an admin's own role, and the verifier `siwa serve`
/// checks keys with, as the runtime role.
@Suite("API keys", .testDatabases)
struct APIKeysTests {
    static let admin = "siwa_test_keys_admin"

    /// An admin login role in siwa_admin (cluster-wide, made once; made by
    /// the superuser, as deploy/README.md has it).
    static func adminURL(for database: TestDatabase) async throws -> String {
        try await loginURL(admin, in: "siwa_admin", for: database)
    }

    /// A login role `user` (password: its name) in `group`, made by the
    /// superuser if missing. Two suites starting at once may both try: the
    /// loser's duplicate is ignored.
    static func loginURL(_ user: String, in group: String, for database: TestDatabase) async throws -> String {
        try await JobsAuditTests.asSuperuser { client in
            try await client.query(PostgresQuery(unsafeSQL: """
                DO $$
                BEGIN
                  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '\(user)') THEN
                    CREATE ROLE \(user) LOGIN PASSWORD '\(user)' IN ROLE \(group);
                  END IF;
                EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
                END $$
                """), logger: TestEnvironment.logger)
        }
        return try LeastPrivilegeTests.url(of: database.configuration, user: user)
    }

    static var keyPattern: Regex<Substring> { /siwa_[a-z2-7]{12}_[A-Za-z0-9_-]{43}/ }

    /// The audit row of `action` for the key `id`, as text per key.
    static func audit(_ database: TestDatabase, action: String, keyID: Int64) async throws -> [String: String] {
        try await database.withClient { client in
            let rows = try await client.query(PostgresQuery(unsafeSQL: """
                SELECT actor, details::text FROM siwa.audit_log
                WHERE action = '\(action)' AND details->>'key_id' = '\(keyID)'
                """), logger: TestEnvironment.logger)
            for try await (actor, details) in rows.decode((String, String).self) {
                var result = (try JSONSerialization.jsonObject(with: Data(details.utf8)) as? [String: Any] ?? [:]).mapValues { "\($0)" }
                result["actor"] = actor
                result["details"] = details
                return result
            }
            return [:]
        }
    }

    @Test func createListVerifyAndRevokeThroughTheExecutable() async throws {
        let database = try await TestDatabase.create()
        let url = try await Self.adminURL(for: database)
        let environment = ["SIWA_DATABASE_URL": url, "SUDO_USER": "alice"]

        let created = try await runSIWA(["api-keys", "create", "backend"], environment: environment)
        #expect(created.status == 0, "\(created.output)")
        let lines = created.output.split(separator: "\n", omittingEmptySubsequences: true)
        let key = String(try #require(lines.last))
        #expect(key.wholeMatch(of: Self.keyPattern) != nil, "\(created.output)")
        #expect(created.output.contains("shown only now"), "\(created.output)")
        let prefix = String(key.dropFirst(5).prefix(12)), secret = String(key.suffix(43))

        // Only the secret's hash is stored.
        let stored = try await database.strings("SELECT encode(secret_sha256, 'hex') FROM siwa.api_keys WHERE prefix = '\(prefix)'")
        let hash = SHA256.hash(data: Data(secret.utf8)).map { String(format: "%02x", $0) }.joined()
        #expect(stored == [hash])

        let table = try await runSIWA(["api-keys", "list"], environment: environment)
        #expect(table.status == 0 && table.output.contains("backend") && table.output.contains(prefix), "\(table.output)")
        #expect(!table.output.contains(secret) && !table.output.contains(hash), "\(table.output)")
        let json = try await runSIWA(["api-keys", "list", "--json"], environment: environment)
        let listed = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [[String: Any]])
        #expect(listed.count == 1 && listed[0]["name"] as? String == "backend" && listed[0]["prefix"] as? String == prefix)
        #expect(listed[0]["created_by"] as? String == Self.admin)
        #expect(listed[0]["scope"] as? String == "app")
        #expect(Set(listed[0].keys) == ["id", "name", "prefix", "scope", "created_at", "created_by", "revoked_at", "revoked_by", "last_used_at"])
        #expect(!json.output.contains(secret) && !json.output.contains(hash) && !json.output.contains("sha256"), "\(json.output)")

        // The verifier, as serve runs it.
        try await TestDatabase.withClient(try database.serveConfiguration) { client in
            let verifier = APIKeyVerifier(client: client, logger: TestEnvironment.logger)
            let identity = try #require(try await verifier.authenticate(bearer: key))
            #expect(identity.name == "backend")
            #expect(try await verifier.authenticate(bearer: "siwa_\(prefix)_\(String(repeating: "A", count: 43))") == nil)
            let flipped = String(key.dropLast()) + (key.last == "A" ? "B" : "A")
            #expect(try await verifier.authenticate(bearer: flipped) == nil)
            #expect(try await verifier.authenticate(bearer: "siwa_aaaaaaaaaaaa_\(secret)") == nil)
            for malformed in ["", "siwa_", key + "A", String(key.dropLast()), key.uppercased(), "Bearer " + key, " " + key] {
                #expect(try await verifier.authenticate(bearer: malformed) == nil, "\(malformed)")
            }
            // 64 requests at once with one key: all through; last_used_at noted.
            let accepted = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<64 { group.addTask { try await verifier.authenticate(bearer: key) == identity } }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(accepted == 64)
            #expect(try await eventually(upTo: .seconds(10)) {
                try await database.scalar("SELECT count(*) FROM siwa.api_keys WHERE last_used_at IS NOT NULL") == 1
            })

            let revoked = try await runSIWA(["api-keys", "revoke", "backend"], environment: environment)
            #expect(revoked.status == 0, "\(revoked.output)")
            #expect(try await verifier.authenticate(bearer: key) == nil, "a revoked key stops working at once")
        }

        let createdAudit = try await Self.audit(database, action: "api_key.created", keyID: identityID(database, prefix))
        #expect(createdAudit["actor"] == "admin" && createdAudit["db_user"] == Self.admin && createdAudit["login_hint"] == "alice", "\(createdAudit)")
        #expect(createdAudit["name"] == "backend" && createdAudit["prefix"] == prefix, "\(createdAudit)")
        let revokedAudit = try await Self.audit(database, action: "api_key.revoked", keyID: identityID(database, prefix))
        #expect(revokedAudit["db_user"] == Self.admin && revokedAudit["login_hint"] == "alice", "\(revokedAudit)")
        for details in [createdAudit["details"], revokedAudit["details"]] {
            #expect(details.map { !$0.contains(secret) && !$0.contains(hash) } == true)
        }
        #expect(try await database.strings("SELECT revoked_by FROM siwa.api_keys") == [Self.admin])

        // Revoking twice, or a name that never was, is refused; a revoked name can be reused.
        let twice = try await runSIWA(["api-keys", "revoke", "backend"], environment: environment)
        #expect(twice.status == 1 && twice.output.contains("already revoked"), "\(twice.output)")
        let never = try await runSIWA(["api-keys", "revoke", "nobody"], environment: environment)
        #expect(never.status == 1 && never.output.contains("no API key named 'nobody'"), "\(never.output)")
        let reused = try await runSIWA(["api-keys", "create", "backend"], environment: environment)
        #expect(reused.status == 0, "\(reused.output)")
        let duplicate = try await runSIWA(["api-keys", "create", "backend"], environment: environment)
        #expect(duplicate.status == 1 && duplicate.output.contains("a live API key named 'backend' exists already"), "\(duplicate.output)")
        let badName = try await runSIWA(["api-keys", "create", "-bad name"], environment: environment)
        #expect(badName.status != 0 && !badName.output.contains("siwa_"), "\(badName.output)")
        #expect(try await database.scalar("SELECT count(*) FROM siwa.audit_log WHERE action LIKE 'api_key.%'") == 3)
    }

    /// `--scope admin`: the key says so in the list, the audit row and to the verifier.
    @Test func anAdminKeyHasTheAdminScope() async throws {
        let database = try await TestDatabase.create()
        let environment = ["SIWA_DATABASE_URL": try await Self.adminURL(for: database)]
        let created = try await runSIWA(["api-keys", "create", "ops-bob", "--scope", "admin"], environment: environment)
        #expect(created.status == 0 && created.output.contains("Created admin API key 'ops-bob'"), "\(created.output)")
        #expect(created.output.contains("admin listener"), "\(created.output)")
        let key = String(try #require(created.output.split(separator: "\n").last))
        let table = try await runSIWA(["api-keys", "list"], environment: environment)
        #expect(table.output.contains("SCOPE") && table.output.contains("ops-bob  admin"), "\(table.output)")
        let prefix = String(key.dropFirst(5).prefix(12))
        let audit = try await Self.audit(database, action: "api_key.created", keyID: try await identityID(database, prefix))
        #expect(audit["scope"] == "admin", "\(audit)")
        try await TestDatabase.withClient(try database.serveConfiguration) { client in
            let identity = try await APIKeyVerifier(client: client, logger: TestEnvironment.logger).authenticate(bearer: key)
            #expect(identity?.scope == .admin && identity?.name == "ops-bob")
        }
        let badScope = try await runSIWA(["api-keys", "create", "ops-eve", "--scope", "root"], environment: environment)
        #expect(badScope.status != 0 && badScope.output.contains("--scope"), "\(badScope.output)")
    }

    func identityID(_ database: TestDatabase, _ prefix: String) async throws -> Int64 {
        Int64(try await database.scalar("SELECT id::int FROM siwa.api_keys WHERE prefix = '\(prefix)'"))
    }

    @Test func theRuntimeRoleCanCheckKeysButNotMakeOrRevokeThem() async throws {
        let database = try await TestDatabase.create()
        let url = try await Self.adminURL(for: database)
        let created = try await runSIWA(["api-keys", "create", "worker-backend"], environment: ["SIWA_DATABASE_URL": url])
        #expect(created.status == 0, "\(created.output)")
        let runtime = try database.serveConfiguration
        #expect(try await LeastPrivilegeTests.sqlState(of: """
            INSERT INTO siwa.api_keys (name, prefix, secret_sha256, created_by) VALUES ('evil', 'abcdefghijkl', '\\x00', 'me')
            """, on: runtime) == "42501")
        #expect(try await LeastPrivilegeTests.sqlState(of: "UPDATE siwa.api_keys SET revoked_at = NULL", on: runtime) == "42501")
        #expect(try await LeastPrivilegeTests.sqlState(of: "UPDATE siwa.api_keys SET secret_sha256 = '\\x00'", on: runtime) == "42501")
        #expect(try await LeastPrivilegeTests.sqlState(of: "DELETE FROM siwa.api_keys", on: runtime) == "42501")
        #expect(try await LeastPrivilegeTests.sqlState(of: "UPDATE siwa.api_keys SET last_used_at = now()", on: runtime) == nil)

        // The same refusal through the command: the runtime role cannot create a key.
        let asRuntime = try await runSIWA(["api-keys", "create", "sneaky"], environment: ["SIWA_DATABASE_URL": database.url])
        #expect(asRuntime.status == 1 && asRuntime.output.contains("permission denied"), "\(asRuntime.output)")
        #expect(asRuntime.output.firstMatch(of: Self.keyPattern) == nil, "\(asRuntime.output)")
    }

    @Test func aMalformedKeyIsRefusedWithoutAskingTheDatabase() async throws {
        // A client that never runs: any query would wait forever.
        let nowhere = try DatabaseConfiguration(url: "postgres://nobody@127.0.0.1:1/nothing?sslmode=disable")
        let idle = PostgresClient(configuration: nowhere.postgresClientConfiguration)
        let verifier = APIKeyVerifier(client: idle, logger: TestEnvironment.logger)
        let answers = try await withTimeLimit(seconds: 5) {
            var answers: [APIKeyIdentity?] = []
            for bearer in ["", "siwa", "siwa_abc_def", "x" + String(repeating: "a", count: 60), "siwa_ABCDEFGHIJKL_" + String(repeating: "a", count: 43)] {
                answers.append(try await verifier.authenticate(bearer: bearer))
            }
            return answers
        }
        #expect(answers.allSatisfy { $0 == nil })
    }
}
