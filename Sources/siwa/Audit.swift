import AccountStore
import ArgumentParser
import Foundation

struct Audit: AsyncParsableCommand {
    static let usage = """
        Needs SIWA_DATABASE_URL: your own database role, a member of siwa_auditor (read-only) or \
        siwa_admin, not the service's. They read the views of sql/010_audit_views.sql, the audit \
        trail and its hash chain (siwa.audit_chain), which hold no email address, name or token. \
        Times are UTC, ISO 8601.
        """

    static let configuration = CommandConfiguration(
        abstract: "Answer from the audit trail: what happened, to whom, whether purges are on time, and whether the trail is intact.",
        discussion: """
              siwa audit [list]     the audit trail, newest first, filtered
              siwa audit user SUB   one Apple user's whole story, and their purges
              siwa audit summary    per day: notifications, refusals, purges and
                                    their latency; the SLA and what needs attention
              siwa audit verify     recompute the audit trail's hash chain
              siwa audit head       the chain's head, SEQ:HASH, to keep elsewhere
            """ + "\n\n" + usage,
        subcommands: [List.self, User.self, Summary.self, AuditVerify.self, AuditHead.self],
        defaultSubcommand: List.self
    )

    /// A bad argument: one line on standard error and exit status 2, as for
    /// a bad setting (argument-parser's own refusal prints the usage too).
    static func badArgument(_ message: String) -> ExitCode {
        FileHandle.standardError.write(Data("siwa: audit: \(message)\n".utf8))
        return ExitCode(2)
    }

    /// `body` with the reports on SIWA_DATABASE_URL; a failure ends the
    /// command with one line (exit status 1).
    static func run<T: Sendable>(_ body: @escaping @Sendable (AuditReports) async throws -> T) async -> T {
        await CommandDatabase.run(label: "siwa.audit", refusing: AuditRefusal.self) { client, logger in
            try await body(AuditReports(client: client, logger: logger))
        }
    }

    /// As `run`, for the user `user` names: the reports and the user's team
    /// (nil: the sub is a user in no team; its rows in every team are read).
    static func run<T: Sendable>(for user: UserArguments,
                                 _ body: @escaping @Sendable (AuditReports, String?) async throws -> T) async -> T {
        await CommandDatabase.run(label: "siwa.audit", refusing: AuditRefusal.self) { client, logger in
            try await body(AuditReports(client: client, logger: logger), try await user.team(client: client, logger: logger))
        }
    }

    /// `--json`, or a table.
    static func emit<T: Encodable>(_ value: T, json: Bool, table: () -> String) throws {
        if json {
            print(String(decoding: try AnswerJSON.pretty(value), as: UTF8.self))
        } else {
            print(table())
        }
    }
}

/// No refusal of its own yet: every failure is the database's.
struct AuditRefusal: Error, CustomStringConvertible {
    let description: String
}

/// A whole number as typed: checked in `validate()`, so that a bad one is
/// one line and exit status 2 like every other bad argument here.
struct WholeNumber: ExpressibleByArgument, Sendable {
    let text: String

    init(argument: String) { text = argument }

    var defaultValueDescription: String { text }

    /// The number if it is a whole number in `range`, else the refusal.
    func checked(_ name: String, in range: ClosedRange<Int>) throws -> Int {
        guard let value = Int(text), range.contains(value) else {
            throw Audit.badArgument("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), got '\(text)'")
        }
        return value
    }
}
