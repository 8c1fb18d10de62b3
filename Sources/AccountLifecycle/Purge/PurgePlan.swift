import AccountStore
import Crypto
import Foundation

/// The operator's purge plan (`SIWA_PURGE_PLAN`): what "delete this user's
/// data" means for their app, as ordered steps. siwa's own built-in step
/// (erase its personal data, keep a tombstone) always runs first and is not
/// part of the file.
///
/// Loaded and checked whole at start-up, so a bad plan stops the worker with
/// an error naming the step instead of failing user by user later.
public struct PurgePlan: Sendable {
    public struct Step: Sendable {
        public let name: String
        public let action: Action
        /// The step's deadline: an SQL step's `timeout_seconds` (its
        /// `statement_timeout`, and a client-side limit a little above it),
        /// or an HTTP step's `http.timeout_seconds` (connect, answer and body together).
        public let timeoutSeconds: Double
    }

    /// An SQL step's `timeout_seconds` when the plan gives none.
    public static let defaultSQLTimeoutSeconds = 60.0
    /// An HTTP step's `http.timeout_seconds` when the plan gives none.
    public static let defaultHTTPTimeoutSeconds = 10.0

    /// The client-side limit on an SQL step: its `statement_timeout` plus a
    /// margin, for a server that does not answer at all.
    public static func clientDeadline(forSQLTimeout seconds: Double) -> Double {
        seconds + min(max(seconds * 0.1, 1), 5)
    }

    /// The longest a step can take before its deadline stops it.
    public var longestStepSeconds: (step: String, seconds: Double)? {
        steps.map { step -> (step: String, seconds: Double) in
            switch step.action {
            case .sql: (step.name, Self.clientDeadline(forSQLTimeout: step.timeoutSeconds))
            case .http: (step.name, step.timeoutSeconds)
            }
        }.max { $0.seconds < $1.seconds }
    }

    public enum Action: Sendable {
        /// Statements run in one transaction. `database` nil: siwa's own
        /// database (the step then takes effect exactly once).
        case sql(statements: [SQLStatement], database: ExternalDatabase?)
        /// A signed POST to a downstream service; only a 2xx counts.
        case http(WebhookTarget)
    }

    public struct SQLStatement: Sendable {
        public let text: String
        /// Highest `$n` used: 0, 1 (the Apple sub) or 2 (and siwa's user id).
        public let parameterCount: Int
    }

    public struct ExternalDatabase: Sendable {
        /// The environment variable the URL came from (for messages; never the URL itself).
        public let environmentName: String
        public let configuration: DatabaseConfiguration
    }

    public struct WebhookTarget: Sendable {
        public let url: URL
        public let key: SymmetricKey
        public let timeoutSeconds: Double
        /// The environment variable the secret came from (never the secret).
        public var secretEnvironmentName: String = ""
    }

    /// Whether a step runs SQL on siwa's own database (as the purge role).
    public var hasOwnDatabaseSQL: Bool {
        steps.contains { step in
            if case .sql(_, nil) = step.action { true } else { false }
        }
    }

    /// The environment variables the plan reads (its secrets' and other
    /// databases' names), so start-up does not take them for typos.
    public var environmentNames: Set<String> {
        Set(steps.compactMap { step in
            switch step.action {
            case .sql(_, let database): database?.environmentName
            case .http(let target): target.secretEnvironmentName
            }
        })
    }

    public let steps: [Step]
    /// Where the plan came from, for the start-up log.
    public let source: String?

    /// No file: only the built-in step runs.
    public static let builtInOnly = PurgePlan(steps: [], source: nil)

    /// The name of the built-in step (reserved: a plan may not use it).
    public static let builtInStepName = ErasePersonalDataStatement.stepName

    /// Every step in the order a job runs them, the built-in one first.
    public var allStepNames: [String] { [Self.builtInStepName] + steps.map(\.name) }

    public static func load(path: String, environment: [String: String]) throws -> PurgePlan {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw PurgePlanError("cannot read \(path): \((error as NSError).localizedDescription)")
        }
        return try parse(data, source: path, environment: environment)
    }

    public static func parse(_ data: Data, source: String? = nil, environment: [String: String]) throws -> PurgePlan {
        let json: JSONValue
        do {
            json = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw PurgePlanError("is not valid JSON (\(Self.parseProblem(error)))")
        }
        let list: [JSONValue]
        if case .object(let object) = json {
            let unknown = Set(object.keys).subtracting(["steps"])
            guard unknown.isEmpty else { throw PurgePlanError("unknown top-level key(s): \(unknown.sorted().joined(separator: ", ")) (expected \"steps\")") }
            guard case .array(let steps)? = object["steps"] else { throw PurgePlanError("\"steps\" must be a list of steps") }
            list = steps
        } else if case .array(let steps) = json {
            list = steps
        } else {
            throw PurgePlanError("must be {\"steps\": [...]} or a list of steps")
        }
        var steps: [Step] = []
        var names = Set([builtInStepName])
        for (index, item) in list.enumerated() {
            let step = try StepParser(index: index, item: item, environment: environment).parse()
            guard names.insert(step.name).inserted else {
                throw PurgePlanError(step: step.name, "the name is used twice (step names must be unique; \(builtInStepName) is reserved)")
            }
            steps.append(step)
        }
        return PurgePlan(steps: steps, source: source)
    }

    /// The parser's own words for where the JSON breaks, without the type
    /// names of a DecodingError's description.
    private static func parseProblem(_ error: any Error) -> String {
        guard case DecodingError.dataCorrupted(let context) = error else { return "\(error)" }
        return (context.underlyingError as? NSError)?.localizedDescription ?? context.debugDescription
    }
}

public struct PurgePlanError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ problem: String) { description = problem }
    init(step: String, _ problem: String) { description = "step '\(step)': \(problem)" }
}

/// One step's JSON, checked field by field.
private struct StepParser {
    let index: Int
    let item: JSONValue
    let environment: [String: String]

    func parse() throws -> PurgePlan.Step {
        guard case .object(let object) = item else { throw PurgePlanError("step #\(index + 1) is not an object") }
        guard case .string(let name)? = object["name"] else { throw PurgePlanError("step #\(index + 1) has no \"name\"") }
        guard !name.isEmpty, name.count <= 64,
              name.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0) }),
              name.allSatisfy(\.isASCII) else {
            throw PurgePlanError("step #\(index + 1): name '\(name.prefix(64))' must be 1-64 characters of A-Z a-z 0-9 . _ -")
        }
        let known: Set<String> = ["name", "sql", "database_url_env", "timeout_seconds", "http"]
        let unknown = Set(object.keys).subtracting(known)
        guard unknown.isEmpty else {
            throw PurgePlanError(step: name, "unknown key(s) \(unknown.sorted().joined(separator: ", ")) (expected name, sql, database_url_env, timeout_seconds or http)")
        }
        switch (object["sql"], object["http"]) {
        case (let sql?, nil):
            var timeout = PurgePlan.defaultSQLTimeoutSeconds
            if let value = object["timeout_seconds"] {
                guard let number = Self.number(value), number >= 0.001, number <= 3600 else {
                    throw PurgePlanError(step: name, "timeout_seconds must be a number of seconds in [0.001, 3600]")
                }
                timeout = number
            }
            return PurgePlan.Step(name: name, action: try sqlAction(name: name, sql: sql, databaseEnv: object["database_url_env"]),
                                  timeoutSeconds: timeout)
        case (nil, let http?):
            guard object["database_url_env"] == nil else { throw PurgePlanError(step: name, "database_url_env belongs to sql steps") }
            guard object["timeout_seconds"] == nil else {
                throw PurgePlanError(step: name, "an http step's timeout goes in http.timeout_seconds")
            }
            let target = try webhook(name: name, http)
            return PurgePlan.Step(name: name, action: .http(target), timeoutSeconds: target.timeoutSeconds)
        case (nil, nil):
            throw PurgePlanError(step: name, "needs \"sql\" (a list of statements) or \"http\" (a downstream service)")
        case (_?, _?):
            throw PurgePlanError(step: name, "has both \"sql\" and \"http\"; make them two steps")
        }
    }

    /// A secret the plan names: the variable, the file `NAME_FILE` names,
    /// or the systemd credential `NAME` (`SecretValue`).
    private func secret(_ variable: String, step: String) throws -> String? {
        do { return try SecretValue.value(of: variable, in: environment) } catch {
            throw PurgePlanError(step: step, "\(error)")
        }
    }

    /// A JSON number (not a boolean, not a string of digits).
    private static func number(_ value: JSONValue) -> Double? {
        switch value {
        case .integer(let whole): Double(whole)
        case .number(let number): number
        default: nil
        }
    }

    private func sqlAction(name: String, sql: JSONValue, databaseEnv: JSONValue?) throws -> PurgePlan.Action {
        guard case .array(let items) = sql, !items.isEmpty, let texts = items.allTexts else {
            throw PurgePlanError(step: name, "\"sql\" must be a non-empty list of statements")
        }
        let statements = try texts.enumerated().map { position, text in
            try Self.statement(text, step: name, position: position + 1)
        }
        guard let databaseEnv else { return .sql(statements: statements, database: nil) }
        guard case .string(let variable) = databaseEnv, !variable.isEmpty else {
            throw PurgePlanError(step: name, "database_url_env must name an environment variable")
        }
        guard let url = try secret(variable, step: name), !url.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw PurgePlanError(step: name, "database_url_env names \(variable), which is not set (nor \(variable)_FILE, nor a credential \(variable))")
        }
        do {
            let configuration = try DatabaseConfiguration(url: url, maximumConnections: 2)
            return .sql(statements: statements, database: PurgePlan.ExternalDatabase(environmentName: variable, configuration: configuration))
        } catch {
            throw PurgePlanError(step: name, "\(variable): \(error)")
        }
    }

    /// One statement per string (the extended protocol runs one at a time),
    /// parameters $1 to $3 at most, and nothing that would step outside the
    /// step's transaction or siwa's role: no transaction control, no role
    /// changes, no session settings that outlive the step, no code blocks.
    /// Quotes and comments are read as PostgreSQL reads them (PlanStatement).
    static func statement(_ text: String, step: String, position: Int) throws -> PurgePlan.SQLStatement {
        let lexed: PlanStatement
        do {
            lexed = try PlanStatement(text)
        } catch PlanStatement.Problem.unterminated(let what) {
            throw PurgePlanError(step: step, "statement \(position) has an unterminated \(what)")
        } catch PlanStatement.Problem.dollarQuote {
            throw PurgePlanError(step: step, "statement \(position) has a dollar-quoted block ($$ or $tag$, as in DO $$...$$); "
                                 + "plan statements are plain SQL (no code blocks or function bodies)")
        }
        let bytes = Array(text.utf8)
        var code = lexed.tokens
        if let end = lexed.tokens.firstIndex(of: .semicolon) {
            // A statement may end with ';' (or several); nothing may follow,
            // not even a comment.
            let rest = bytes[lexed.offsets[end]...]
            guard rest.allSatisfy({ $0 == UInt8(ascii: ";") || $0 == UInt8(ascii: " ") || (0x09...0x0D).contains($0) }) else {
                throw PurgePlanError(step: step, "statement \(position) holds more than one statement (or text after its ';'); give each its own string")
            }
            code = Array(lexed.tokens[..<end])
        }
        let bodyEnd = lexed.tokens.firstIndex(of: .semicolon).map { lexed.offsets[$0] } ?? bytes.count
        let body = String(decoding: bytes[..<bodyEnd], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !code.isEmpty, !body.isEmpty else { throw PurgePlanError(step: step, "statement \(position) is empty") }
        if let refusal = Self.refusal(PlanStatement.words(in: code)) {
            throw PurgePlanError(step: step, "statement \(position) \(refusal)")
        }
        let highest = PlanStatement.highestParameter(in: code)
        guard highest <= 3 else {
            throw PurgePlanError(step: step, "statement \(position) uses $\(highest); only $1 (the Apple sub), $2 (siwa's user id, or NULL) and $3 (the sub's team) exist")
        }
        return PurgePlan.SQLStatement(text: body, parameterCount: highest)
    }

    /// Why a statement (its unquoted words, upper-cased) may not be in a plan, or nil.
    static func refusal(_ words: [String]) -> String? {
        guard let first = words.first else { return nil }
        let second = words.count > 1 ? words[1] : ""
        let third = words.count > 2 ? words[2] : ""
        let transactionControl: Set<String> = ["BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE"]
        if transactionControl.contains(first) || (first == "PREPARE" && second == "TRANSACTION") {
            let command = first == "PREPARE" || first == "START" ? "\(first) TRANSACTION" : first
            return "controls the transaction (\(command)); each step runs in one transaction that siwa commits"
        }
        switch first {
        case "SET":
            let target = ["LOCAL", "SESSION"].contains(second) && third != "AUTHORIZATION" ? Array(words.dropFirst(2)) : Array(words.dropFirst())
            if target.first == "ROLE" || target.first == "SESSION_AUTHORIZATION"
                || (target.first == "SESSION" && target.dropFirst().first == "AUTHORIZATION") {
                return "changes the role (SET \(target.first == "ROLE" ? "ROLE" : "SESSION AUTHORIZATION")); steps run as siwa's database user"
            }
            if target.first == "STATEMENT_TIMEOUT" {
                return "sets statement_timeout; the step's timeout_seconds sets it"
            }
            if second != "LOCAL", !["CONSTRAINTS", "TRANSACTION"].contains(second) {
                return "uses SET without LOCAL, which outlives the step on a pooled connection; use SET LOCAL"
            }
            return nil
        case "RESET":
            if second == "ROLE" || (second == "SESSION" && third == "AUTHORIZATION") {
                return "changes the role (RESET \(second == "ROLE" ? "ROLE" : "SESSION AUTHORIZATION")); steps run as siwa's database user"
            }
            return "uses RESET, which outlives the step on a pooled connection; use SET LOCAL"
        case "DO":
            return "is a code block (DO); plan statements are plain SQL"
        case "PREPARE", "EXECUTE", "DEALLOCATE", "DISCARD":
            return "changes the connection's session state (\(first)); plan statements are plain SQL"
        default:
            break
        }
        if words.contains("SET_CONFIG") {
            return "calls set_config, which can change the role or the timeout; use SET LOCAL"
        }
        return nil
    }

    private func webhook(name: String, _ value: JSONValue) throws -> PurgePlan.WebhookTarget {
        guard case .object(let object) = value else { throw PurgePlanError(step: name, "\"http\" must be an object") }
        let unknown = Set(object.keys).subtracting(["url", "secret_env", "timeout_seconds"])
        guard unknown.isEmpty else {
            throw PurgePlanError(step: name, "unknown http key(s) \(unknown.sorted().joined(separator: ", ")) (expected url, secret_env, timeout_seconds)")
        }
        guard case .string(let text)? = object["url"], let url = URL(string: text),
              let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme), url.host?.isEmpty == false else {
            throw PurgePlanError(step: name, "http.url must be an http(s) URL")
        }
        guard case .string(let secretName)? = object["secret_env"], !secretName.isEmpty else {
            throw PurgePlanError(step: name, "http.secret_env must name the environment variable holding the signing secret")
        }
        guard let secret = try secret(secretName, step: name), !secret.isEmpty else {
            throw PurgePlanError(step: name, "http.secret_env names \(secretName), which is not set (nor \(secretName)_FILE, nor a credential \(secretName))")
        }
        // The spec's form only, with a key no one can guess: the downstream
        // checks the signature with a Standard Webhooks library, which reads
        // `whsec_` + base64, and an erasure request must not be forgeable.
        let key: SymmetricKey
        do {
            key = try StandardWebhook.strictKey(fromSecret: secret)
        } catch {
            throw PurgePlanError(step: name, "http.secret_env \(secretName): \(error)")
        }
        var timeout = PurgePlan.defaultHTTPTimeoutSeconds
        if let value = object["timeout_seconds"] {
            guard let number = Self.number(value), number > 0, number <= 300 else {
                throw PurgePlanError(step: name, "http.timeout_seconds must be a number of seconds in (0, 300]")
            }
            timeout = number
        }
        return PurgePlan.WebhookTarget(url: url, key: key, timeoutSeconds: timeout, secretEnvironmentName: secretName)
    }
}

private extension [JSONValue] {
    /// The strings, if every element is one.
    var allTexts: [String]? {
        let texts = compactMap { if case .string(let text) = $0 { text } else { nil } }
        return texts.count == count ? texts : nil
    }
}
