import AccountStore
import ArgumentParser
import Foundation

struct APIKeys: AsyncParsableCommand {
    static let usage = """
        Run it with your own database role (a member of siwa_admin) in SIWA_DATABASE_URL, not the \
        service's: each change writes an audit row (actor admin, db_user = that role, login_hint = \
        your login name, a hint only).
        The app's backend calls siwa's /v1 endpoints with the key in a header: \
        `Authorization: Bearer siwa_<prefix>_<secret>`. siwa stores only the SHA-256 of the secret, \
        so a lost key cannot be shown again: revoke it and create another.
        A key has a scope: `app` (the default) opens /v1 only; `admin` opens the admin listener \
        (SIWA_ADMIN_HTTP_PORT: /admin, its JSON routes and page) only. Give each admin a key of \
        their own: the audit trail names the key for what it changed.
        """

    static let configuration = CommandConfiguration(
        commandName: "api-keys",
        abstract: "Create, list and revoke the API keys the app's backend calls siwa with.",
        discussion: usage,
        subcommands: [Create.self, List.self, Revoke.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an API key; prints it once, as the last line.",
            discussion: """
                The explanation goes to standard error and the key alone to standard output, so \
                `siwa api-keys create backend > key` keeps only the key. The key is shown this once.
                """ + "\n" + APIKeys.usage
        )

        @Argument(help: "A name for the key, e.g. the backend that uses it (a letter or digit, then up to 62 of A-Z a-z 0-9 . _ -).")
        var name: String

        @Option(help: "app: the app's backend, /v1 (sign-in, users, deletion); admin: the admin listener (/admin).")
        var scope: APIKeyScope = .app

        func validate() throws {
            guard APIKeyAdministration.isValidName(name) else {
                throw ValidationError("NAME must be 1 to 63 characters: a letter or digit, then letters, digits, '.', '_' or '-'")
            }
        }

        func run() async throws {
            let name = name, scope = scope
            let (key, row) = await APIKeysDatabase.run { try await $0.create(name: name, scope: scope, loginHint: JobsConnection.loginHint) }
            let use = switch row.scope {
            case .app:
                """
                The app's backend sends it as `Authorization: Bearer <key>`. It is shown only now: siwa keeps only a hash.
                Put it in the backend's secret store; revoke it with `siwa api-keys revoke \(row.name)`.
                """
            case .admin:
                """
                It opens the admin listener only (SIWA_ADMIN_HTTP_PORT): `Authorization: Bearer <key>`, or in a browser \
                any user name with the key as the password. It is shown only now: siwa keeps only a hash.
                Revoke it with `siwa api-keys revoke \(row.name)`.
                """
            }
            FileHandle.standardError.write(Data("""
                Created \(row.scope.rawValue) API key '\(row.name)' (id \(row.id), prefix \(row.prefix)) as database role \(row.createdBy).
                \(use)

                """.utf8))
            print(key)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the API keys, live and revoked (never a key or its hash).",
            discussion: APIKeys.usage
        )

        @Flag(help: "One JSON array instead of a table.")
        var json = false

        func run() async throws {
            let keys = await APIKeysDatabase.run { try await $0.list() }
            if json {
                print(try APIKeysOutput.json(keys))
            } else {
                print(keys.isEmpty ? "no API keys" : APIKeysOutput.table(keys))
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke the live API key with this name; it stops working at once.",
            discussion: APIKeys.usage
        )

        @Argument(help: "The key's name.")
        var name: String

        func run() async throws {
            let name = name
            let row = await APIKeysDatabase.run { try await $0.revoke(name: name, loginHint: JobsConnection.loginHint) }
            print("API key '\(row.name)' (prefix \(row.prefix)) revoked by \(row.revokedBy ?? "?")")
        }
    }
}

extension APIKeyScope: ExpressibleByArgument {}

enum APIKeysDatabase {
    static func run<T: Sendable>(_ body: @escaping @Sendable (APIKeyAdministration) async throws -> T) async -> T {
        await CommandDatabase.run(label: "siwa.api-keys", refusing: APIKeyAdministrationError.self) { client, logger in
            try await body(APIKeyAdministration(client: client, logger: logger))
        }
    }
}

enum APIKeysOutput {
    static func json(_ keys: [APIKeySummary]) throws -> String {
        String(decoding: try AnswerJSON.pretty(keys), as: UTF8.self)
    }

    static func table(_ keys: [APIKeySummary]) -> String {
        func time(_ date: Date) -> String { UTCTime.text(date, .seconds) }
        var rows = [["NAME", "SCOPE", "PREFIX", "CREATED", "CREATED BY", "LAST USED", "REVOKED"]]
        for key in keys {
            let revoked = key.revokedAt.map { "\(time($0)) by \(key.revokedBy ?? "?")" } ?? "-"
            rows.append([key.name, key.scope.rawValue, key.prefix, time(key.createdAt), key.createdBy,
                         key.lastUsedAt.map(time) ?? "-", revoked])
        }
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
