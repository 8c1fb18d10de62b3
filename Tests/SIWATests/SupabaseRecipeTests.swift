import AccountStore
import Foundation
import PostgresNIO
import Testing

/// docs/alongside.md's Supabase recipe, for real: a database holding
/// Supabase Auth's tables (Fixtures/supabase-auth.sql), three Supabase users
/// (one signed in with Apple as the sub siwa purges, one with Apple as
/// another sub, one with an email only), the purged user also signed in
/// through siwa (which holds Apple's refresh token), then Apple's
/// account-delete notification to siwa serve and a real `siwa worker` with
/// deploy/purge-plan.supabase.example.json as its plan, connecting as the
/// role and with the grants the page shows. Exactly that user, its
/// identities and what cascades from it are gone; nothing else is.
/// Serialized: both tests make the same roles of the cluster.
@Suite("Supabase recipe", .testDatabases, .serialized, .timeLimit(.minutes(10)))
struct SupabaseRecipeTests {
    static let planFile = "deploy/purge-plan.supabase.example.json"
    static let page = "docs/alongside.md"
    static let purged = "001.supabase.0001"
    static let otherApple = "001.supabase.0002"

    static func text(_ path: String) throws -> String {
        try String(contentsOf: TestEnvironment.repositoryRoot.appendingPathComponent(path), encoding: .utf8)
    }

    /// The fenced block of `language` that follows the line `marker` in the page.
    static func block(_ language: String, after marker: String, in page: String) throws -> String {
        let lines = page.split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(lines.firstIndex { $0.trimmingCharacters(in: .whitespaces) == marker },
                                 "\(Self.page) has no line \(marker)")
        let open = try #require(lines[start...].firstIndex { $0 == "```\(language)" }, "no ```\(language) after \(marker)")
        let close = try #require(lines[(open + 1)...].firstIndex { $0 == "```" }, "an unclosed block after \(marker)")
        return lines[(open + 1)..<close].joined(separator: "\n")
    }

    /// Runs a script, one statement at a time, in one transaction.
    static func run(_ sql: String, on configuration: DatabaseConfiguration) async throws {
        try await TestDatabase.withClient(configuration) { client in
            try await client.withTransaction(logger: TestEnvironment.logger) { connection in
                for statement in SQLScript.statements(sql) {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: TestEnvironment.logger)
                }
            }
        }
    }

    static func strings(_ sql: String, on configuration: DatabaseConfiguration) async throws -> [String] {
        try await TestDatabase.withClient(configuration) { client in
            var result: [String] = []
            for try await value in try await client.query(PostgresQuery(unsafeSQL: sql), logger: TestEnvironment.logger).decode(String.self) {
                result.append(value)
            }
            return result
        }
    }

    /// A database with Supabase Auth's tables, its roles, and the page's
    /// role and grants for the plan's connection: its superuser view and
    /// the URL the plan connects with.
    static func supabaseDatabase(page: String) async throws -> (superuser: DatabaseConfiguration, planURL: String) {
        let server = try DatabaseConfiguration(url: try TestEnvironment.databaseURL)
        let (name, configuration) = try await TestDatabase.createEmpty(on: server, prefix: "supabase_")
        let superuser = try configuration.superuser()
        // Roles are the cluster's: made once, kept for the next run.
        try await run("""
            DO $$ BEGIN
              IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'supabase_auth_admin') THEN
                CREATE ROLE supabase_auth_admin NOLOGIN NOINHERIT;
              END IF;
            END $$
            """, on: superuser)
        try await run(try String(contentsOf: Fixtures.directory.appendingPathComponent("supabase-auth.sql"), encoding: .utf8),
                      on: superuser)
        // The page's statements as it shows them; a CREATE ROLE only when
        // the role is not there yet.
        var role = ""
        for statement in SQLScript.statements(try block("sql", after: "<!-- the plan's role -->", in: page)) {
            if let match = statement.firstMatch(of: /^CREATE ROLE ([a-z_]+)\s/) {
                role = String(match.output.1)
                if try await strings("SELECT rolname::text FROM pg_roles WHERE rolname = '\(role)'", on: superuser).isEmpty {
                    try await run(statement, on: superuser)
                }
            } else {
                try await run(statement, on: superuser)
            }
        }
        #expect(role == "apple_purge", "the page's role: \(role)")
        var components = try #require(URLComponents(string: try TestEnvironment.databaseURL))
        components.user = role
        components.password = "CHANGE-ME"
        components.path = "/\(name)"
        return (superuser, try #require(components.string))
    }

    /// A Supabase user as Supabase Auth writes one: the user, its
    /// identities, a session with a refresh token.
    static func insertUser(_ id: String, email: String, identities: [(provider: String, providerID: String)],
                           on superuser: DatabaseConfiguration) async throws {
        let provider = identities.first?.provider ?? "email"
        var sql = """
            INSERT INTO auth.users (instance_id, id, aud, role, email, email_confirmed_at, raw_app_meta_data, raw_user_meta_data,
                                    created_at, updated_at, last_sign_in_at)
            VALUES ('00000000-0000-0000-0000-000000000000', '\(id)', 'authenticated', 'authenticated', '\(email)', now(),
                    '{"provider": "\(provider)", "providers": ["\(identities.map { $0.provider }.joined(separator: "\", \""))"]}',
                    '{"email": "\(email)", "email_verified": true}', now(), now(), now());
            INSERT INTO auth.sessions (id, user_id, created_at, updated_at, aal)
            VALUES (gen_random_uuid(), '\(id)', now(), now(), 'aal1');
            INSERT INTO auth.refresh_tokens (instance_id, token, user_id, revoked, created_at, updated_at, session_id)
            SELECT '00000000-0000-0000-0000-000000000000', md5(random()::text), '\(id)', false, now(), now(), id
            FROM auth.sessions WHERE user_id = '\(id)';
            INSERT INTO auth.one_time_tokens (id, user_id, token_type, token_hash, relates_to)
            VALUES (gen_random_uuid(), '\(id)', 'recovery_token', md5(random()::text), '\(email)');
            """
        for identity in identities {
            let issuer = identity.provider == "apple" ? #", "iss": "https://appleid.apple.com""# : ""
            sql += """

                INSERT INTO auth.identities (provider_id, user_id, identity_data, provider, last_sign_in_at, created_at, updated_at)
                VALUES ('\(identity.providerID)', '\(id)',
                        '{"sub": "\(identity.providerID)", "email": "\(email)", "email_verified": true\(issuer)}',
                        '\(identity.provider)', now(), now(), now());
                """
        }
        try await run(sql, on: superuser)
    }

    @Test func theAccountDeleteRemovesExactlyThatSupabaseUser() async throws {
        let page = try Self.text(Self.page)
        // The page shows the plan the worker runs, byte for byte.
        let plan = try Self.text(Self.planFile).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try Self.block("json", after: "<!-- \(Self.planFile) -->", in: page) == plan,
                "\(Self.page) must show \(Self.planFile) as it is")

        let (supabase, planURL) = try await Self.supabaseDatabase(page: page)
        let deleted = "a0000000-0000-4000-8000-000000000001"
        let otherAppleUser = "a0000000-0000-4000-8000-000000000002"
        let emailUser = "a0000000-0000-4000-8000-000000000003"
        // The purged user signed in with Apple, and linked an email identity too.
        try await Self.insertUser(deleted, email: "deleted@privaterelay.appleid.com",
                                  identities: [("apple", Self.purged), ("email", deleted)], on: supabase)
        try await Self.insertUser(otherAppleUser, email: "other@privaterelay.appleid.com",
                                  identities: [("apple", Self.otherApple)], on: supabase)
        try await Self.insertUser(emailUser, email: "someone@example.com", identities: [("email", emailUser)], on: supabase)
        // An MFA factor with a challenge, and an AMR claim on a session: the second level of cascades.
        try await Self.run("""
            INSERT INTO auth.mfa_factors (id, user_id, friendly_name, factor_type, status, created_at, updated_at)
            SELECT gen_random_uuid(), id, 'phone', 'totp', 'verified', now(), now() FROM auth.users;
            INSERT INTO auth.mfa_challenges (id, factor_id, created_at, ip_address)
            SELECT gen_random_uuid(), id, now(), '192.0.2.1' FROM auth.mfa_factors;
            INSERT INTO auth.mfa_amr_claims (session_id, created_at, updated_at, authentication_method, id)
            SELECT id, now(), now(), 'oauth', gen_random_uuid() FROM auth.sessions;
            """, on: supabase)

        // siwa beside it: the app also sent Apple's code to siwa, which
        // holds the refresh token.
        let signIn = try await SignInTests.Setup.start()
        try atTestEnd { await signIn.server.stop() }
        let before = Set(signIn.apple.issuedRefreshTokens)
        let signedIn = try await signIn.signIn(try signIn.appleSignIn(sub: Self.purged))
        #expect(signedIn.status == 200, "\(signedIn.text)")
        let refreshToken = try #require(Set(signIn.apple.issuedRefreshTokens).subtracting(before).first)
        let harness = try await WorkerHarness.start(
            database: signIn.server.database,
            settings: SignInFixture.settings(signIn.fixture, appleBaseURL: signIn.server.appleServer.baseURL).merging([
                "SIWA_PURGE_PLAN": TestEnvironment.repositoryRoot.appendingPathComponent(Self.planFile).path,
                "SUPABASE_DATABASE_URL": planURL,
            ]) { $1 })
        try atTestEnd { await harness.stop() }
        let db = signIn.server.database

        #expect(try await signIn.server.post(token: try signIn.server.notification("account-delete", sub: Self.purged)).status == 200)
        let worker = try harness.startWorker()
        try atTestEnd { await worker.kill9() }
        let done = try await harness.wait {
            try await db.scalar("SELECT count(*) FROM siwa.jobs WHERE kind = 'purge_user' AND state = 'completed'") == 1
        }
        #expect(done, "the purge did not complete: \(worker.log.suffix(3000))")
        #expect(try await db.strings("""
            SELECT details->>'step' FROM siwa.audit_log WHERE action = 'job.step_completed' ORDER BY seq
            """) == ["apple.revoke_tokens", "siwa.erase_personal_data", "supabase-auth"])
        #expect(signIn.apple.revokedTokens.contains(refreshToken), "siwa revoked Apple's token first")

        // Exactly that user is gone, with its identities (the Apple one and
        // the linked email one), sessions, refresh tokens, MFA rows and
        // one-time tokens; the others keep all of theirs.
        func ids(_ sql: String) async throws -> [String] { try await Self.strings(sql, on: supabase) }
        #expect(try await ids("SELECT id::text FROM auth.users ORDER BY id") == [otherAppleUser, emailUser])
        #expect(try await ids("SELECT provider || ':' || provider_id FROM auth.identities ORDER BY provider, provider_id")
                == ["apple:\(Self.otherApple)", "email:\(emailUser)"])
        for table in ["sessions", "mfa_factors", "one_time_tokens"] {
            #expect(try await ids("SELECT user_id::text FROM auth.\(table) ORDER BY user_id") == [otherAppleUser, emailUser], "\(table)")
        }
        #expect(try await ids("SELECT user_id FROM auth.refresh_tokens ORDER BY user_id") == [otherAppleUser, emailUser])
        #expect(try await ids("SELECT count(*)::text FROM auth.mfa_challenges") == ["2"])
        #expect(try await ids("SELECT count(*)::text FROM auth.mfa_amr_claims") == ["2"])
        #expect(await worker.terminate() == 0)
    }

    /// What the page warns of: Supabase Auth's tables have row level
    /// security on and no policy, so a role without BYPASSRLS that holds
    /// every grant deletes nothing, and its step still succeeds.
    @Test func withoutBypassRLSTheStepDeletesNothing() async throws {
        let (supabase, _) = try await Self.supabaseDatabase(page: try Self.text(Self.page))
        let user = "b0000000-0000-4000-8000-000000000001"
        try await Self.insertUser(user, email: "rls@privaterelay.appleid.com", identities: [("apple", Self.purged)], on: supabase)
        let plan = try Self.planStatement(Self.text(Self.planFile))
        try await Self.run("""
            DO $$ BEGIN
              IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'apple_purge_without_bypass') THEN
                CREATE ROLE apple_purge_without_bypass NOLOGIN;
              END IF;
            END $$;
            GRANT USAGE ON SCHEMA auth TO apple_purge_without_bypass;
            GRANT SELECT ON auth.identities TO apple_purge_without_bypass;
            GRANT SELECT, DELETE ON auth.users TO apple_purge_without_bypass;
            """, on: supabase)
        let left = try await TestDatabase.withClient(supabase) { client in
            try await client.withTransaction(logger: TestEnvironment.logger) { connection -> Int in
                try await connection.query("SET LOCAL ROLE apple_purge_without_bypass", logger: TestEnvironment.logger)
                // As the worker binds it: $1, the sub, the statement's only parameter.
                var binds = PostgresBindings()
                binds.append(Self.purged)
                try await connection.query(PostgresQuery(unsafeSQL: plan, binds: binds), logger: TestEnvironment.logger)
                try await connection.query("RESET ROLE", logger: TestEnvironment.logger)
                var count = 0
                for try await value in try await connection.query("SELECT count(*)::int FROM auth.users", logger: TestEnvironment.logger)
                    .decode(Int.self) { count = value }
                return count
            }
        }
        #expect(left == 1, "the user is still there: row level security hid it from the DELETE")
    }

    /// The one statement of the recipe's plan.
    static func planStatement(_ json: String) throws -> String {
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        let steps = try #require(object?["steps"] as? [[String: Any]])
        return try #require((steps.first?["sql"] as? [String])?.first)
    }
}
