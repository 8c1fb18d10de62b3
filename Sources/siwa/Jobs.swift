import SIWAConfiguration
import AccountLifecycle
import AccountStore
import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import SIWAServer

struct Jobs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Inspect the purge queue; retry, cancel or run now a job (each change is audited).",
        discussion: """
            Needs SIWA_DATABASE_URL: your own database role (a member of siwa_admin), not the \
            service's. siwa_admin reads the queue but writes nothing itself: retry, cancel and \
            run-now call functions (siwa.change_job, sql/017) that check the change, make it and \
            write its audit row (actor admin) naming that role (db_user, the database's \
            session_user) and, as a hint only, your login name (login_hint: SUDO_USER, logname or \
            USER).
            Job states: available, running, retryable, completed, \
            discarded (attempts used up, or a completion the audit trail does not back; error \
            history kept), cancelled.
            Request a purge by hand (an erasure asked for by email, say), audited the same way:
              SELECT * FROM siwa.request_purge('001234.abc.0001', 'alice');
            """,
        subcommands: [List.self, Show.self, Retry.self, Cancel.self, RunNow.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List jobs, newest first.")

        @Option(help: "Only jobs in this state (\(JobState.allCases.map(\.rawValue).joined(separator: ", "))).")
        var state: JobState?

        @Option(help: "Only jobs of this kind (\(JobKinds.listed)).")
        var kind: String?

        @OptionGroup var user: UserFilterOptions

        @Option(help: "At most this many jobs.")
        var limit = 100

        @Flag(help: "One JSON array instead of a table.")
        var json = false

        func validate() throws {
            guard (1...100_000).contains(limit) else { throw ValidationError("--limit must be in 1...100000") }
            if let kind, !JobKinds.contains(kind) {
                throw ValidationError("--kind must be a job kind's name (\(JobKinds.listed))")
            }
        }

        func run() async throws {
            let (state, kind, sub, team, limit) = (state, kind, user.sub, user.team, limit)
            let jobs = try await JobsConnection.run { try await $0.list(state: state, kind: kind, appleSub: sub, team: team, limit: limit) }
            if json {
                print(try JobsOutput.json(jobs))
            } else if jobs.isEmpty {
                print((["no", state?.rawValue, kind, "jobs"].compactMap { $0 } + (sub.map { ["of", $0] } ?? [])).joined(separator: " "))
            } else {
                print(JobsOutput.table(jobs))
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one job with its error history and completed steps (JSON).")

        @Argument(help: "The job id.")
        var id: Int64

        func run() async throws {
            guard let job = try await JobsConnection.run({ try await $0.show(id: id) }) else {
                JobsConnection.refuse("no job with id \(id)")
            }
            print(try JobsOutput.json(job))
        }
    }

    struct Retry: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a discarded, cancelled or retryable job again now.",
            discussion: "A job that used up its attempts gets one more. Steps already done stay done."
        )

        @Argument(help: "The job id.")
        var id: Int64

        func run() async throws {
            let job = try await JobsConnection.run { try await $0.retry(id: id, by: .databaseRole(loginHint: JobsConnection.loginHint)) }
            print("job \(job.id) is \(job.state.rawValue) (attempt \(job.attempt) of \(job.maxAttempts) done)")
        }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Cancel a job that is waiting to run (available or retryable).")

        @Argument(help: "The job id.")
        var id: Int64

        func run() async throws {
            let job = try await JobsConnection.run { try await $0.cancel(id: id, by: .databaseRole(loginHint: JobsConnection.loginHint)) }
            print("job \(job.id) is \(job.state.rawValue)")
        }
    }

    struct RunNow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run-now",
            abstract: "Run now a job that waits for a later time (available or retryable, run_at ahead).",
            discussion: """
                For a job held back on purpose: a consent-revoked purge waiting out its grace delay \
                (SIWA_CONSENT_REVOKED_PURGE_DELAY_DAYS) when the user asked for erasure at once, or a \
                retry backing off after the cause was fixed. Sets run_at to now and wakes the \
                workers; audit row job.run_now. Refused, changing nothing, for a job that is due \
                already, running, or finished (completed, discarded, cancelled: see retry).
                """
        )

        @Argument(help: "The job id.")
        var id: Int64

        func run() async throws {
            let job = try await JobsConnection.run { try await $0.runNow(id: id, by: .databaseRole(loginHint: JobsConnection.loginHint)) }
            print("job \(job.id) is \(job.state.rawValue) and due now (attempt \(job.attempt) of \(job.maxAttempts) done)")
        }
    }
}

extension JobState: ExpressibleByArgument {}

/// A short-lived connection for one admin command.
enum JobsConnection {
    /// The caller's login name, for the audit trail's `login_hint` only:
    /// `SUDO_USER`, else the terminal's login name (`logname`), else `USER`,
    /// else the name of the real user id. The caller can set all but the
    /// last, so it is never proof. Who acted is the database role
    /// (`session_user`), which the database records itself.
    static var loginHint: String? {
        let env = ProcessInfo.processInfo.environment
        var candidates = [env["SUDO_USER"]]
        if let login = getlogin() { candidates.append(String(cString: login)) }
        candidates.append(env["USER"])
        if let entry = getpwuid(getuid()), let name = entry.pointee.pw_name { candidates.append(String(cString: name)) }
        for case let value? in candidates {
            let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
            if !trimmed.isEmpty { return String(trimmed.prefix(64)) }
        }
        return "uid \(getuid())"
    }

    static func run<T: Sendable>(_ body: @escaping @Sendable (JobAdministration) async throws -> T) async throws -> T {
        await CommandDatabase.run(label: "siwa.jobs", refusing: JobAdministrationError.self) { client, logger in
            try await body(JobAdministration(client: client, logger: logger))
        }
    }

    static func refuse(_ message: String) -> Never {
        Startup.fail(message, code: 1)
    }
}

enum JobsOutput {
    /// Jobs as JSON (`JobSummary`'s encoding: `errors` and `steps_done` as
    /// JSON values rather than strings of JSON).
    static func json(_ jobs: [JobSummary]) throws -> String {
        String(decoding: try AnswerJSON.pretty(jobs), as: UTF8.self)
    }

    static func json(_ job: JobSummary) throws -> String {
        String(decoding: try AnswerJSON.pretty(job), as: UTF8.self)
    }

    static func table(_ jobs: [JobSummary]) -> String {
        var rows = [["ID", "KIND", "STATE", "ATTEMPT", "APPLE SUB", "EVENT", "RUN AT", "LAST ERROR"]]
        for job in jobs {
            rows.append([String(job.id), job.kind, job.state.rawValue, "\(job.attempt)/\(job.maxAttempts)", job.appleSub ?? "-",
                         job.eventType ?? "-", UTCTime.text(job.runAt, .seconds), lastError(job.errors)])
        }
        return TextTable.render(rows)
    }

    /// The newest entry of a job's error history, shortened for a table.
    static func lastError(_ errors: String) -> String {
        guard case .array(let list)? = try? JSONValue(parsing: errors), let last = list.last else { return "-" }
        let step = if case .string(let name)? = last["step"] { "\(name): " } else { "" }
        let text = if case .string(let error)? = last["error"] { step + error } else { step + "?" }
        return text.count > 60 ? String(text.prefix(57)) + "..." : text
    }
}
