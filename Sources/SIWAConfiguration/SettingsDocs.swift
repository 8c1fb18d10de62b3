/// The settings as people read them, made from `SettingsCatalog`: the
/// `--help` blocks, and the README's table (`siwa settings --markdown`;
/// a test checks README.md and deploy/*.env.example against the catalog).
public enum SettingsDocs {
    /// For a command's `--help`.
    public static func help(for reader: Setting.Reader) -> String {
        let lines = SettingsCatalog.all.filter { $0.readers.contains(reader) }.map { setting in
            var line = "  \(setting.name)  (\(setting.documentedDefault.replacingOccurrences(of: "`", with: ""))"
            if let bounds = setting.bounds { line += "; \(bounds.replacingOccurrences(of: "`", with: ""))" }
            return line + ")\n      \(setting.help.replacingOccurrences(of: "`", with: ""))"
        }
        return "Settings (environment; README.md and `siwa settings` list them all). An unknown SIWA_* name is reported at start-up as a likely typo.\n"
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
}
