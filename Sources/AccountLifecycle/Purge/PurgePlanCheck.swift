import AccountStore
import AppleSignIn
import Foundation
import Logging
import PostgresNIO

/// `siwa worker --check-plan`: tries every step of the plan without running
/// it. SQL steps: each statement is PREPAREd on its database (siwa's own or
/// the step's `database_url_env` one) inside a transaction that is rolled
/// back, so the names, columns and types it uses are checked and nothing
/// runs. HTTP steps: a Standard Webhooks-signed test request,
/// `{"type":"siwa.plan_check",...}` with `webhook-id: siwa-check-<uuid>`,
/// which the downstream should answer 2xx and otherwise ignore. Each step's
/// own timeout applies.
public struct PurgePlanCheck: Sendable {
    public struct Outcome: Sendable {
        public let step: String
        public let passed: Bool
        /// What was checked, or why the step failed: no URLs, no secrets.
        public let detail: String

        /// `ok    step: detail` or `FAIL  step: detail`.
        public var line: String { "\(passed ? "ok  " : "FAIL") \(step): \(detail)" }
    }

    let plan: PurgePlan
    let ownDatabase: PostgresClient
    /// Clients for steps on other databases, by step name.
    let externalDatabases: [String: PostgresClient]
    let webhooks: WebhookDelivery
    /// What the SQL steps on siwa's database run as (SIWA_PURGE_ROLE).
    let purgeRole: String
    let logger: Logger

    public init(plan: PurgePlan, ownDatabase: PostgresClient, externalDatabases: [String: PostgresClient],
                webhooks: WebhookDelivery, purgeRole: String, logger: Logger) {
        self.plan = plan
        self.purgeRole = purgeRole
        self.ownDatabase = ownDatabase
        self.externalDatabases = externalDatabases
        self.webhooks = webhooks
        self.logger = logger
    }

    /// One outcome per plan step, in plan order.
    public func run() async -> [Outcome] {
        var outcomes: [Outcome] = []
        for step in plan.steps {
            outcomes.append(await check(step))
        }
        return outcomes
    }

    private func check(_ step: PurgePlan.Step) async -> Outcome {
        switch step.action {
        case .sql(let statements, let database):
            let place = database.map { "the \($0.environmentName) database" } ?? "siwa's database"
            guard let client = database == nil ? ownDatabase : externalDatabases[step.name] else {
                return Outcome(step: step.name, passed: false, detail: "no database client for \(place)")
            }
            do {
                let role = database == nil ? purgeRole : nil
                try await withTimeLimit(seconds: PurgePlan.clientDeadline(forSQLTimeout: step.timeoutSeconds)) { [logger] in
                    try await client.withGuardedConnection { connection in
                        try await Self.prepareAll(statements, timeoutSeconds: step.timeoutSeconds, as: role, on: connection, logger: logger)
                    }
                }
                let count = statements.count == 1 ? "1 statement" : "\(statements.count) statements"
                return Outcome(step: step.name, passed: true, detail: "sql: \(count) prepared on \(place) (nothing run)")
            } catch {
                return Outcome(step: step.name, passed: false, detail: "sql on \(place): \(Self.describe(error))")
            }
        case .http(let target):
            let id = "siwa-check-\(UUID().uuidString.lowercased())"
            let body = Data(#"{"type":"siwa.plan_check","step":\#(JSONText.quoted(step.name)),"check_id":\#(JSONText.quoted(id)),"test":true}"#.utf8)
            do {
                let status = try await webhooks.deliver(to: target, id: id, body: body)
                return Outcome(step: step.name, passed: true,
                               detail: "http: \(target.url.host ?? "?") answered \(status) to a signed test request (webhook-id \(id))")
            } catch let failure as WebhookFailure {
                return Outcome(step: step.name, passed: false, detail: "http: \(failure.description)")
            } catch {
                return Outcome(step: step.name, passed: false, detail: "http: \(type(of: error))")
            }
        }
    }

    /// BEGIN, the step's settings (and role), PREPARE (and DEALLOCATE) each
    /// statement, ROLLBACK. The first statement that does not prepare fails the step.
    static func prepareAll(_ statements: [PurgePlan.SQLStatement], timeoutSeconds: Double, as role: String? = nil,
                           on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query("BEGIN", logger: logger)
        do {
            try await PurgeJobRunner.drain(PurgeJobRunner.stepSettings(timeoutSeconds: timeoutSeconds), on: connection, logger: logger)
            if let role { try await PurgeJobRunner.drain(PurgeRole.become(role), on: connection, logger: logger) }
            for (index, statement) in statements.enumerated() {
                do {
                    try await prepare(statement, index: index + 1, on: connection, logger: logger)
                } catch {
                    throw StatementCheckFailure(position: index + 1, underlying: error)
                }
            }
            try await connection.query("ROLLBACK", logger: logger)
        } catch {
            if !connection.isClosed { _ = try? await connection.query("ROLLBACK", logger: logger) }
            throw error
        }
    }

    /// Statements PREPARE accepts are prepared with the parameter types siwa
    /// binds ($1 text, $2 bigint, $3 text), which analyses them against the schema.
    /// Others (CALL, TRUNCATE, ...) go through the protocol's Parse only,
    /// which checks their syntax.
    private static func prepare(_ statement: PurgePlan.SQLStatement, index: Int, on connection: PostgresConnection,
                                logger: Logger) async throws {
        let preparable: Set<String> = ["SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "VALUES", "WITH", "TABLE"]
        let lexed = try? PlanStatement(statement.text)
        let first = lexed?.tokens.first
        let isPreparable = switch first {
        case .word(let word)?: preparable.contains(word)
        case .other?: statement.text.hasPrefix("(")
        default: false
        }
        if isPreparable {
            let name = "siwa_plan_check_\(index)"
            let types = ["text", "bigint", "text"].prefix(statement.parameterCount)
            let parameters = types.isEmpty ? "" : " (\(types.joined(separator: ", ")))"
            try await connection.query(PostgresQuery(unsafeSQL: "PREPARE \(name)\(parameters) AS \(statement.text)\n"), logger: logger)
            try await connection.query(PostgresQuery(unsafeSQL: "DEALLOCATE \(name)"), logger: logger)
        } else {
            let prepared = try await connection.prepare(query: statement.text).get()
            try await prepared.deallocate().get()
        }
    }

    /// The database's own message for a statement that does not prepare
    /// (it names tables and columns, not data); the code otherwise.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let failure as StatementCheckFailure:
            return "statement \(failure.position): \(describe(failure.underlying))"
        case let psql as PSQLError:
            if let state = psql.serverInfo?[.sqlState] {
                if state == "57014" { return "timed out (statement_timeout, sqlstate 57014)" }
                let message = psql.serverInfo?[.message] ?? ""
                return "sqlstate \(state): \(message)"
            }
            return "cannot use the database (\(safeDescription(psql)))"
        case let limit as TimeLimitExceeded:
            return "timed out: no answer from the database within \(limit.seconds.formattedSeconds) s"
        case is ConnectionClosed:
            return "the database connection closed"
        default:
            return "\(type(of: error))"
        }
    }
}

struct StatementCheckFailure: Error {
    let position: Int
    let underlying: any Error
}
