import Foundation
import Testing

/// sql/README.md, the map of the schema, stays true: it names every table,
/// view, function, trigger and row-level security policy a migrated database
/// has, nothing else, and for each the migration that last defines it and
/// the earlier ones (SQLDefinitions says how they are read from the files).
/// A new migration fails this test until the map has its lines; each
/// failure is the line to add or correct.
@Suite("SQL map", .testDatabases)
struct SQLMapTests {
    static let sqlDirectory = TestEnvironment.repositoryRoot.appendingPathComponent("sql")

    static func migrationFiles() throws -> [(name: String, text: String)] {
        try FileManager.default.contentsOfDirectory(atPath: sqlDirectory.path).filter { $0.hasSuffix(".sql") }.sorted().map { name in
            (name: name, text: try String(contentsOf: sqlDirectory.appendingPathComponent(name), encoding: .utf8))
        }
    }

    @Test func theMapNamesEveryObjectOfAMigratedDatabaseAndTheMigrationsThatDefineIt() async throws {
        let markdown = try String(contentsOf: Self.sqlDirectory.appendingPathComponent("README.md"), encoding: .utf8)
        let map = SQLMap(markdown: markdown)
        for kind in SQLMap.Kind.allCases {
            #expect(map.entries[kind]?.isEmpty == false, "sql/README.md: no lines read under \(kind.heading)")
        }
        let database = try await TestDatabase.create()
        let catalog = try await Self.catalog(of: database)
        #expect(catalog[.table]?.contains("audit_log") == true, "the catalog query found no siwa.audit_log")
        for problem in map.problems(catalog: catalog, files: try Self.migrationFiles()) {
            Issue.record("sql/README.md, \(problem)")
        }
    }

    /// The checker itself, on a schema of two files: a table altered later,
    /// a function with two forms, a trigger re-created, a policy per role.
    @Test func aMissingWrongOrStaleLineIsReportedWithTheLineToWrite() {
        let files = [
            (name: "001_a.sql", text: """
                CREATE TABLE siwa.t (id int);
                CREATE FUNCTION siwa.f(runtime name) RETURNS void LANGUAGE sql AS $$ SELECT 1 $$;
                -- CREATE TABLE siwa.commented (id int);
                CREATE TRIGGER t_touch
                    AFTER UPDATE OF id ON siwa.t FOR EACH ROW EXECUTE FUNCTION siwa.touch();
                """),
            (name: "002_b.sql", text: """
                ALTER TABLE siwa.t ADD COLUMN c int;
                CREATE FUNCTION siwa.f(runtime name, processes text[], OUT done boolean) LANGUAGE sql AS $$ SELECT true $$;
                CREATE OR REPLACE FUNCTION siwa.f(runtime name) RETURNS void LANGUAGE sql AS $$ SELECT 2 $$;
                DROP TRIGGER t_touch ON siwa.t;
                CREATE TRIGGER t_touch AFTER UPDATE ON siwa.t FOR EACH ROW EXECUTE FUNCTION siwa.touch();
                CREATE FUNCTION siwa.limit(runtime name) RETURNS void LANGUAGE plpgsql AS $$
                BEGIN
                    EXECUTE format('CREATE POLICY %I ON siwa.t AS RESTRICTIVE', 'limit_' || runtime);
                END $$;
                """),
        ]
        let catalog: [SQLMap.Kind: Set<String>] = [
            .table: ["t", "u"], .view: [], .function: ["f(name)", "f(name, text[])", "limit"],
            .trigger: ["t_touch on t"], .policy: ["limit_siwa_serve on t"],
        ]
        let a = "[001](001_a.sql)", b = "[002](002_b.sql)"
        let map = SQLMap(markdown: """
            ## Tables
            | table | holds | last defined in | earlier |
            | --- | --- | --- | --- |
            | `t` | rows | \(a) | |
            | `gone` | nothing | \(a) | |
            ## Functions
            | function | does | last defined in | earlier |
            | --- | --- | --- | --- |
            | `f(name)` | one form | \(b) | \(a) |
            | `f(name, text[])` | the other | \(b) | |
            | `limit` | makes policies | \(b) | |
            ## Triggers
            | trigger | on | does | last defined in | earlier |
            | --- | --- | --- | --- | --- |
            | `t_touch` | `t` | touches | \(a) | |
            ## Row-level security policies
            | policy | on | does | last defined in | earlier |
            | --- | --- | --- | --- | --- |
            | `limit_<role>` | `t` | per role | \(b) | |
            """)
        let problems = map.problems(catalog: catalog, files: files)
        #expect(problems.sorted() == [
            "## Tables: `gone` is not in a migrated database: remove its line (or correct its name)",
            "## Tables: `gone` says last defined in \(a), earlier nothing; no migration creates, replaces or alters it: "
                + "| `gone` | (what it is) | (who makes it) |  |",
            "## Tables: `t` says last defined in \(a), earlier nothing; the migrations say so: | `t` | (what it is) | \(b) | \(a) |",
            "## Tables: `u` is missing: add | `u` | (what it is) | (who makes it) |  |",
            "## Triggers: `t_touch on t` says last defined in \(a), earlier nothing; the migrations say so: "
                + "| `t_touch` | `t` | (what it is) | \(b) | \(a) |",
        ], "\(problems.joined(separator: "\n"))")
    }

    /// What a migrated database has in the schema siwa, as the map's keys:
    /// a function by its name, or `name(types)` when it has several forms;
    /// a trigger or policy as `name on table`.
    static func catalog(of database: TestDatabase) async throws -> [SQLMap.Kind: Set<String>] {
        let inSiwa = "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'siwa'"
        let functions = try await database.strings("""
            SELECT p.proname::text || '(' || oidvectortypes(p.proargtypes) || ')'
            FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'siwa'
            """)
        let forms = Dictionary(grouping: functions) { String($0.prefix { $0 != "(" }) }
        return [
            .table: Set(try await database.strings("SELECT c.relname::text FROM pg_class c \(inSiwa) AND c.relkind IN ('r', 'p')")),
            .view: Set(try await database.strings("SELECT c.relname::text FROM pg_class c \(inSiwa) AND c.relkind IN ('v', 'm')")),
            .function: Set(forms.flatMap { name, signatures in signatures.count == 1 ? [name] : signatures }),
            .trigger: Set(try await database.strings("""
                SELECT t.tgname::text || ' on ' || c.relname::text FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                \(inSiwa) AND NOT t.tgisinternal
                """)),
            .policy: Set(try await database.strings("""
                SELECT p.polname::text || ' on ' || c.relname::text FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid \(inSiwa)
                """)),
        ]
    }
}
