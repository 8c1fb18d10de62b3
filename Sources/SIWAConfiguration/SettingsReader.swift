import AccountStore
import Configuration
import Foundation

/// Reads the `SIWA_*` settings (`SettingsCatalog`) with one-line errors.
///
/// The values come through swift-configuration (its environment provider,
/// which keeps secret values out of its descriptions); siwa parses and
/// bounds them itself, so a bad value stops start-up with a line that names
/// the setting, the accepted range and what was given.
public struct SettingsReader: Sendable {
    /// The raw variables, for the unknown-name check.
    public let values: [String: String]
    /// Secrets given in a way that cannot be used (two sources, a file that
    /// cannot be read), by setting; reading that setting throws its problem.
    public let problems: [String: SettingError]
    private let reader: ConfigReader

    /// A secret setting may come from `NAME`, a file `NAME_FILE` names, or
    /// the systemd credential `NAME` (`SecretValue`); a path setting (a key
    /// file, the purge plan) from `NAME` or the credential `NAME`, whose
    /// file's path is then its value. swift-configuration reads the result.
    public init(_ values: [String: String] = ProcessInfo.processInfo.environment) {
        self.values = values
        var resolved = values.filter { $0.key.hasPrefix("SIWA_") }
        var problems: [String: SettingError] = [:]
        for setting in SettingsCatalog.all {
            if setting.secret {
                do throws(SettingError) {
                    resolved[setting.name] = try SecretValue.value(of: setting.name, in: values)
                } catch {
                    problems[setting.name] = SettingError(setting.name, error.name == setting.name ? error.problem : "\(error)")
                }
            } else if case .path = setting.kind, let file = SecretValue.credentialFile(setting.name, in: values),
                      !SecretValue.credentialIsEmpty(file) {
                if let given = values[setting.name], !given.isEmpty, given != file {
                    problems[setting.name] = SettingError(setting.name, "is given 2 ways (\(setting.name), the credential \(setting.name) ($\(SecretValue.credentialsVariable))): keep one")
                }
                resolved[setting.name] = file
            }
        }
        self.problems = problems
        let secrets = Set(SettingsCatalog.all.filter(\.secret).map(\.name))
        reader = ConfigReader(provider: EnvironmentVariablesProvider(
            environmentVariables: resolved, secretsSpecifier: .specific(secrets)))
    }

    /// The value, trimmed; nil when unset or blank, and when it has a
    /// problem (`problems`; start-up reports those first, `optional` throws it).
    public func string(_ setting: Setting) -> String? {
        guard problems[setting.name] == nil, let value = reader.string(forKey: ConfigKey(setting.configKey), isSecret: setting.secret)?
            .trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    /// The value, trimmed; nil when unset or blank; its problem thrown.
    public func optional(_ setting: Setting) throws -> String? {
        if let problem = problems[setting.name] { throw problem }
        return string(setting)
    }

    /// The value, else the catalog's default.
    public func text(_ setting: Setting) throws -> String {
        guard let value = try optional(setting) ?? setting.defaultValue else { return try required(setting) }
        return value
    }

    public func required(_ setting: Setting) throws -> String {
        guard let value = try optional(setting) else {
            let elsewhere = setting.secret ? ", or in a file: \(setting.name)_FILE=PATH or the systemd credential \(setting.name)" : ""
            throw SettingError(setting.name, "is required (e.g. \(setting.name)=\(setting.example ?? "...")\(elsewhere))")
        }
        return value
    }

    /// - Parameter fallback: a default computed from other settings (the
    ///   catalog's documents it); otherwise the catalog's.
    public func integer(_ setting: Setting, default fallback: Int? = nil) throws -> Int {
        guard case .integer(let range) = setting.kind else { throw Self.misdeclared(setting, as: "integer") }
        guard let text = try optional(setting) else { return try fallback ?? parse(setting.defaultValue, setting) { Int($0) } }
        guard let number = Int(text), range.contains(number) else {
            throw SettingError(setting.name, "expected a whole number in \(range.lowerBound)...\(range.upperBound), got '\(text.prefix(40))'")
        }
        return number
    }

    /// Seconds, or days for a `.days` setting.
    public func number(_ setting: Setting, default fallback: Double? = nil) throws -> Double {
        let (range, unit): (ClosedRange<Double>, String)
        switch setting.kind {
        case .seconds(let bounds): (range, unit) = (bounds, "seconds")
        case .days(let bounds): (range, unit) = (bounds, "days")
        default: throw Self.misdeclared(setting, as: "number")
        }
        guard let text = try optional(setting) else { return try fallback ?? parse(setting.defaultValue, setting) { Double($0) } }
        guard let number = Double(text), number.isFinite, range.contains(number) else {
            throw SettingError(setting.name, "expected a number of \(unit) in \(range.lowerBound)...\(range.upperBound), got '\(text.prefix(40))'")
        }
        return number
    }

    public func url(_ setting: Setting) throws -> String {
        let text = try self.text(setting)
        guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil else {
            throw SettingError(setting.name, "expected an http(s) URL, got '\(text.prefix(80))'")
        }
        return text
    }

    public func choice(_ setting: Setting) throws -> String {
        guard case .choice(let choices) = setting.kind else { throw Self.misdeclared(setting, as: "choice") }
        let text = try optional(setting)?.lowercased() ?? setting.defaultValue ?? ""
        guard choices.contains(text) else {
            throw SettingError(setting.name, "expected one of \(choices.joined(separator: ", ")), got '\(text.prefix(40))'")
        }
        return text
    }

    /// A listener's port: nil for `off` (no listener), 0 for any free port.
    public func listenerPort(_ setting: Setting) throws -> Int? {
        let text = try self.text(setting)
        if text.lowercased() == "off" { return nil }
        guard let port = Int(text), (0...65535).contains(port) else {
            throw SettingError(setting.name, "expected off or a whole number in 0...65535, got '\(text.prefix(40))'")
        }
        return port
    }

    /// A required comma list with at least one entry.
    public func list(_ setting: Setting) throws -> [String] {
        let items = try required(setting).split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !items.isEmpty else { throw SettingError(setting.name, "lists nothing") }
        return items
    }

    /// What is wrong with `setting`'s own value (required and missing, out
    /// of its bounds, a file that cannot be read), nil when nothing: `siwa
    /// check` asks every setting a process reads, so that it reports them all
    /// at once. What depends on several settings is for their reader.
    public func problem(_ setting: Setting) -> SettingError? {
        do {
            guard let value = try optional(setting) else {
                if setting.required { _ = try required(setting) }
                return nil
            }
            switch setting.kind {
            case .integer: _ = try integer(setting)
            case .seconds, .days: _ = try number(setting)
            case .url: _ = try url(setting)
            case .choice: _ = try choice(setting)
            case .list: _ = try list(setting)
            case .databaseURL: _ = try DatabaseConfiguration(url: value)
            case .path where !setting.name.hasSuffix("_DIR"):
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: value, isDirectory: &isDirectory) else {
                    throw SettingError(setting.name, "\(value): no such file")
                }
                guard !isDirectory.boolValue else { throw SettingError(setting.name, "\(value) is a directory, not a file") }
                guard FileManager.default.isReadableFile(atPath: value) else {
                    throw SettingError(setting.name, "\(value): permission denied")
                }
            case .path, .text: break
            }
            return nil
        } catch let error as SettingError {
            return error
        } catch {
            return SettingError(setting.name, "\(error)")
        }
    }

    /// `SIWA_*` variables that no command reads: most likely a typo, so
    /// start-up reports each with the closest real name. `also` are names
    /// this command knows of besides the catalog (the purge plan's).
    public func unknownNames(also known: Set<String> = []) -> [String] {
        let names = Set(SettingsCatalog.all.map(\.name)).union(known)
            .union(SettingsCatalog.fileVariables)
        return values.keys.filter { name in
            name.hasPrefix("SIWA_") && !names.contains(name) && !SettingsCatalog.toolPrefixes.contains { name.hasPrefix($0) }
        }.sorted().map { name in
            let closest = SettingsCatalog.all.map(\.name).min { Self.distance($0, name) < Self.distance($1, name) }
            if let closest, Self.distance(closest, name) <= max(3, name.count / 4) {
                return "\(name) is not a siwa setting (did you mean \(closest)?)"
            }
            return "\(name) is not a siwa setting"
        }
    }

    private func parse<T>(_ text: String?, _ setting: Setting, _ convert: (String) -> T?) throws -> T {
        guard let text, let value = convert(text) else { throw SettingError(setting.name, "has no usable default (a bug in siwa)") }
        return value
    }

    private static func misdeclared(_ setting: Setting, as kind: String) -> SettingError {
        SettingError(setting.name, "is not declared as a \(kind) setting (a bug in siwa)")
    }

    /// Edit distance, for "did you mean".
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        var row = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in 1...max(1, b.count) where !b.isEmpty {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return row[b.count]
    }
}
