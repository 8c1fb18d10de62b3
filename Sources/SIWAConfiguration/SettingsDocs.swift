/// The settings as people read them, made from `SettingsCatalog`: the
/// `--help` blocks, docs/settings.md's table (`siwa settings --markdown`) and the
/// deploy/*.env.example files (`siwa settings --env-file NAME`). A test
/// checks the committed docs/settings.md and env files against these.
public enum SettingsDocs {
    /// For a command's `--help`.
    public static func help(for reader: Setting.Reader) -> String {
        let lines = SettingsCatalog.all.filter { $0.readers.contains(reader) }.map { setting in
            var line = "  \(setting.name)  (\(setting.documentedDefault.replacingOccurrences(of: "`", with: ""))"
            if let bounds = setting.bounds { line += "; \(bounds.replacingOccurrences(of: "`", with: ""))" }
            return line + ")\n      \(setting.help.replacingOccurrences(of: "`", with: ""))"
        }
        return "Settings (environment; docs/settings.md and `siwa settings` list them all). An unknown SIWA_* name is reported at start-up as a likely typo.\n"
            + lines.joined(separator: "\n")
    }

    /// Every setting, one table row each.
    public static func markdownTable() -> String {
        var rows = ["| setting | read by | default | meaning |", "| --- | --- | --- | --- |"]
        for setting in SettingsCatalog.all {
            let readers = Setting.Reader.allCases.filter(setting.readers.contains).map(\.rawValue).joined(separator: ", ")
            var meaning = setting.help
            if let bounds = setting.bounds { meaning += " (\(bounds))" }
            rows.append("| `\(setting.name)` | \(readers) | \(setting.documentedDefault) | \(meaning.replacingOccurrences(of: "|", with: "\\|")) |")
        }
        return rows.joined(separator: "\n")
    }

    /// The whole of deploy/`file`.example: the header, then by section each
    /// setting of the file, explained and followed by `NAME=example` when it
    /// is required or `#NAME=default` when it is not, then the trailer.
    public static func envFile(_ file: Setting.EnvFile) -> String {
        var lines = comment(header(file) + "\n\nMade by `siwa settings --env-file \(file.rawValue)` from siwa's one declaration of each setting. A line `#NAME=value` shows an optional setting with its default (or an example): remove the `#` to set it.")
        for section in SettingsCatalog.sections {
            let settings = section.settings.filter { $0.files.contains(file) }
            if settings.isEmpty { continue }
            lines += ["", rule(section.title)]
            for setting in settings {
                lines.append("")
                lines += comment(summary(setting))
                if let details = setting.details { lines += comment(details) }
                let credentials = UnitCredentials.loading(setting.name, for: file)
                if let source = source(setting, credentials) { lines += comment(source) }
                let example = setting.fileExamples[file] ?? setting.example
                // A value the unit loads from a file of its own is shown, not set, here.
                let set = (setting.required || setting.setInExamples) && credentials.isEmpty
                let value = setting.required || setting.setInExamples ? example
                    : (setting.defaultDescription == nil ? setting.defaultValue : nil) ?? example ?? setting.defaultValue
                lines.append((set ? "" : "#") + setting.name + "=" + (value ?? ""))
            }
        }
        if let trailer = trailer(file) { lines += [""] + trailer }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Where else the value may come from: the file a unit loads as a
    /// credential, or for a secret `NAME_FILE`. nil for a plain setting.
    static func source(_ setting: Setting, _ credentials: [(unit: String, file: String)]) -> String? {
        let units = credentials.map(\.unit).joined(separator: " and ")
        let files = Set(credentials.map(\.file)).sorted().joined(separator: ", ")
        if setting.secret, !credentials.isEmpty {
            return """
                Better in a file of its own: \(units) \(credentials.count == 1 ? "loads" : "load") it from \(files) \
                (mode 0600, owner root; the systemd credential \(setting.name), which only the \
                unit's user can read), or set \(setting.name)_FILE to a file of your own. Give it \
                one way only: two are refused at start.
                """
        }
        if setting.secret {
            return """
                Or from a file: \(setting.name)_FILE=PATH, or the systemd credential \(setting.name) \
                (`systemctl edit` the unit: LoadCredential=\(setting.name):PATH). One way only.
                """
        }
        if !credentials.isEmpty {
            return """
                \(units) \(credentials.count == 1 ? "gives its" : "give each its own") user a private copy of \(files) \
                when it exists (mode 0600, owner root; the systemd credential \(setting.name)) and \
                siwa reads it there: leave this unset, or point it elsewhere with `systemctl edit` \
                (docs/operations.md, "Secrets in files").
                """
        }
        return nil
    }

    /// The help as a sentence, then a line of the bounds and the default.
    static func summary(_ setting: Setting) -> String {
        var limits = setting.bounds.map { bounds in
            if case .choice = setting.kind { "One of \(bounds). " } else { "\(bounds). " }
        } ?? ""
        let defaultText = setting.documentedDefault.replacingOccurrences(of: "`", with: "")
        limits += setting.required ? "Required." : "Default: \(defaultText == "none" ? "unset" : defaultText)."
        return setting.help.prefix(1).uppercased() + setting.help.dropFirst() + ".\n" + limits.prefix(1).uppercased() + limits.dropFirst()
    }

    /// What each file says first: where it goes, who reads it, what it must never hold.
    static func header(_ file: Setting.EnvFile) -> String {
        switch file {
        case .shared:
            """
            /etc/siwa/siwa.env: the settings that both siwa-serve and siwa-worker read \
            (and the siwa-migrate oneshot), each unit before its own file. No secrets in \
            here: a secret lives in a file of its own that only the unit using it loads (a \
            systemd credential: serve.database-url, worker.database-url, \
            migrate.database-url, ...) or in that unit's env file, and the keys are files of \
            their own.

            Install all /etc/siwa/*.env files mode 0600, owner root: systemd reads them \
            (as root) before it starts the service as its own user, so the services \
            themselves cannot read any env file, not even their own.

            systemd EnvironmentFile syntax: NAME=value, one per line; no `export`, no shell \
            expansion; quote a value only if it has leading/trailing spaces. A setting in \
            both siwa.env and a unit's own file: the unit's file wins (it is read second). \
            A missing or malformed setting stops start-up with one line naming it (exit \
            status 2; the units do not restart on it); `siwa check serve` (or worker), which \
            the units run first, reports every problem at once.
            """
        case .serve:
            """
            /etc/siwa/serve.env: settings of siwa serve only (the internet-facing \
            receiver), read by siwa-serve.service after siwa.env. Install mode 0600, owner \
            root (see siwa.env). serve's database URL, with its role's password \
            (siwa_serve), goes in /etc/siwa/serve.database-url, which the unit loads as a \
            credential; nothing of the worker's is here: no purge plan, no webhook secrets, \
            no other database's URL.
            """
        case .worker:
            """
            /etc/siwa/worker.env: settings and secrets of siwa worker only, read by \
            siwa-worker.service after siwa.env. Install mode 0600, owner root (see \
            siwa.env). The internet-facing siwa-serve never gets these: the purge plan's \
            webhook secrets and other databases' URLs live here alone (or, better, in files \
            the unit loads as credentials), and the worker's own database URL (siwa_worker) \
            in /etc/siwa/worker.database-url. `siwa tokens` runs with this file.
            """
        case .migrate:
            """
            /etc/siwa/migrate.env: settings of `siwa migrate` only, read by the \
            siwa-migrate oneshot unit after siwa.env (or by a run by hand: deploy/README.md, \
            "Migrate"). Install mode 0600, owner root. Neither siwa-serve nor siwa-worker \
            reads it nor /etc/siwa/migrate.database-url, the schema owner's URL with its \
            password, which the unit loads as a credential.

            siwa migrate connects as the schema owner (SIWA_DATABASE_URL, from \
            /etc/siwa/migrate.database-url or here; or SIWA_MIGRATE_DATABASE_URL when set) \
            and grants serve's privileges to SIWA_SERVE_ROLE and the worker's to \
            SIWA_WORKER_ROLE, roles you create beforehand (deploy/README.md, "The \
            database"). Their passwords live in serve.database-url and \
            worker.database-url, never here.
            """
        }
    }

    /// What comes after the settings: the purge plan's own variables, which are no SIWA_ settings.
    static func trailer(_ file: Setting.EnvFile) -> [String]? {
        guard file == .worker else { return nil }
        return [rule("the purge plan's secrets"), ""] + comment("""
            Variables the purge plan refers to by name (`database_url_env`, `secret_env`); \
            these names are the ones deploy/purge-plan.example.json uses. Another \
            database's URL takes the same sslmode and sslrootcert parameters as \
            SIWA_DATABASE_URL; give that database a role of its own for the plan. siwa \
            does not report them as unknown settings. Each may come from a file \
            instead: NAME_FILE=PATH, or the systemd credential NAME (`systemctl edit \
            siwa-worker`: LoadCredential=NAME:PATH).
            """) + [
            "#ANALYTICS_DATABASE_URL=postgres://siwa_purge:CHANGE-ME@analytics.internal:5432/analytics?sslmode=verify-full&sslrootcert=/etc/siwa/db-ca.pem",
            "#CRM_WEBHOOK_SECRET=whsec_CHANGE-ME-make-one-with-siwa-webhooks-secret",
        ]
    }

    static let width = 78

    /// `# ------ title --`, `width` columns.
    static func rule(_ title: String) -> String {
        "# " + String(repeating: "-", count: max(4, width - 6 - title.count)) + " \(title) --"
    }

    /// `text` as `# ` lines of at most `width` columns (a longer word gets a
    /// line of its own). Each "\n" starts a new line, an empty line is `#`,
    /// and a "- " item's following lines are indented under its text.
    static func comment(_ text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).flatMap { line -> [String] in
            let indent = line.hasPrefix("- ") ? "  " : ""
            var lines: [String] = []
            var current = "#"
            for word in line.split(separator: " ") {
                if current != "#" && current.count + 1 + word.count > width {
                    lines.append(current)
                    current = "# " + indent + word
                } else {
                    current += " " + word
                }
            }
            return lines + [current]
        }
    }
}
