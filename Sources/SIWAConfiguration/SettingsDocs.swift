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
                let example = setting.fileExamples[file] ?? setting.example
                let set = setting.required || setting.setInExamples
                let value = set ? example
                    : (setting.defaultDescription == nil ? setting.defaultValue : nil) ?? example ?? setting.defaultValue
                lines.append((set ? "" : "#") + setting.name + "=" + (value ?? ""))
            }
        }
        if let trailer = trailer(file) { lines += [""] + trailer }
        return lines.joined(separator: "\n") + "\n"
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
            here: a secret lives in the file of the one unit that uses it (serve.env, \
            worker.env, migrate.env), and the sign-in keys are files of their own.

            Install all /etc/siwa/*.env files mode 0600, owner root: systemd reads them \
            (as root) before it starts the service as its own user, so the services \
            themselves cannot read any env file, not even their own.

            systemd EnvironmentFile syntax: NAME=value, one per line; no `export`, no shell \
            expansion; quote a value only if it has leading/trailing spaces. A setting in \
            both siwa.env and a unit's own file: the unit's file wins (it is read second). \
            A missing or malformed setting stops start-up with one line naming it (exit \
            status 2; the units do not restart on it).
            """
        case .serve:
            """
            /etc/siwa/serve.env: settings of siwa serve only (the internet-facing \
            receiver), read by siwa-serve.service after siwa.env. Install mode 0600, owner \
            root (see siwa.env). It holds serve's own database role and password \
            (siwa_serve) and nothing of the worker's: no purge plan, no webhook secrets, no \
            other database's URL.
            """
        case .worker:
            """
            /etc/siwa/worker.env: settings and secrets of siwa worker only, read by \
            siwa-worker.service after siwa.env. Install mode 0600, owner root (see \
            siwa.env). The internet-facing siwa-serve never gets these: the worker's own \
            database role and password (siwa_worker), the purge plan's webhook secrets and \
            other databases' URLs live here alone. `siwa tokens` runs with this file.
            """
        case .migrate:
            """
            /etc/siwa/migrate.env: settings of `siwa migrate` only, read by the \
            siwa-migrate oneshot unit after siwa.env (or by a run by hand: deploy/README.md, \
            "Migrate"). Install mode 0600, owner root. Neither siwa-serve nor siwa-worker \
            reads it: the schema owner's password is here alone.

            siwa migrate connects as the schema owner (SIWA_DATABASE_URL here, or \
            SIWA_MIGRATE_DATABASE_URL when set) and grants serve's privileges to \
            SIWA_SERVE_ROLE and the worker's to SIWA_WORKER_ROLE, roles you create \
            beforehand (deploy/README.md, "The database"). Their passwords live in \
            serve.env and worker.env, never here.
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
            does not report them as unknown settings.
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
