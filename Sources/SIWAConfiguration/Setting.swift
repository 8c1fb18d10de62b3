/// One `SIWA_*` setting, declared once: its name, what it holds, its
/// default, its bounds and its help. Start-up validation, `--help`, the
/// docs/settings.md's table and the `deploy/*.env.example` files all come from these
/// declarations (`SettingsCatalog`), so a default is written in one place.
public struct Setting: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case text
        /// An http(s) URL.
        case url
        /// A postgres:// URL (checked by DatabaseConfiguration when used).
        case databaseURL
        /// A comma-separated list.
        case list
        case path
        case integer(ClosedRange<Int>)
        /// A number of seconds (fractions allowed).
        case seconds(ClosedRange<Double>)
        /// A number of days (fractions allowed).
        case days(ClosedRange<Double>)
        case choice([String])
    }

    /// Which command reads it (for `--help`, docs/settings.md and unknown-name checks).
    public enum Reader: String, Sendable, Hashable, CaseIterable {
        case serve, worker, migrate, jobs, audit, tokens
        case apiKeys = "api-keys"
        case receipts
        case webhooks
        case transfer
    }

    /// Where it goes in deploy/ (each unit reads only its own files, so the
    /// internet-facing serve never holds the worker's secrets).
    public enum EnvFile: String, Sendable, Hashable, CaseIterable {
        case shared = "siwa.env"
        case serve = "serve.env"
        case worker = "worker.env"
        case migrate = "migrate.env"
    }

    public let name: String
    public let kind: Kind
    /// As written in an env file; nil: required, or absent unless set.
    public let defaultValue: String?
    public let required: Bool
    /// For the "is required (e.g. ...)" line and the env files.
    public let example: String?
    /// The example a particular env file shows instead (each unit's own
    /// database role in its own file).
    public let fileExamples: [EnvFile: String]
    /// How the docs state the default when it is not a plain value.
    public let defaultDescription: String?
    public let help: String
    /// More for the deploy/ env files, beside `help`: why, how, what to
    /// watch for. Lines starting with "- " are list items.
    public let details: String?
    public let readers: Set<Reader>
    /// The deploy/ env files it belongs in (most have one).
    public let files: [EnvFile]
    /// Never printed back (a database URL carries a password).
    public let secret: Bool
    /// Set (not commented out) in the env files though not required: what
    /// most deployments give (the one team's settings, which the clients
    /// file replaces).
    public let setInExamples: Bool

    public init(_ name: String, _ kind: Kind, default defaultValue: String? = nil, required: Bool = false,
                example: String? = nil, fileExamples: [EnvFile: String] = [:], defaultDescription: String? = nil, readers: Set<Reader>, files: [EnvFile],
                secret: Bool = false, setInExamples: Bool = false, help: String, details: String? = nil) {
        self.name = name
        self.kind = kind
        self.defaultValue = defaultValue
        self.required = required
        self.example = example
        self.fileExamples = fileExamples
        self.defaultDescription = defaultDescription
        self.help = help
        self.details = details
        self.readers = readers
        self.files = files
        self.secret = secret
        self.setInExamples = setInExamples
    }

    /// The key swift-configuration reads it under (`SIWA_HTTP_PORT` is
    /// `siwa.http.port`; EnvironmentVariablesProvider maps it back).
    var configKey: [String] { name.lowercased().split(separator: "_").map(String.init) }

    /// The default as the docs say it.
    public var documentedDefault: String {
        if required { return "required" }
        return defaultDescription ?? defaultValue.map { "`\($0)`" } ?? "none"
    }

    /// The accepted values, for the docs.
    public var bounds: String? {
        switch kind {
        case .integer(let range): "\(range.lowerBound) to \(range.upperBound)"
        case .seconds(let range): "\(Self.number(range.lowerBound)) to \(Self.number(range.upperBound)) s"
        case .days(let range): "\(Self.number(range.lowerBound)) to \(Self.number(range.upperBound)) days"
        case .choice(let choices): choices.map { "`\($0)`" }.joined(separator: ", ")
        default: nil
        }
    }

    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
