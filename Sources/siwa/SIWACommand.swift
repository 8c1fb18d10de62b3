import ArgumentParser
import SIWAConfiguration

struct SIWACommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "siwa",
        abstract: "Sign in with Apple account-lifecycle server.",
        discussion: """
            Receives Apple's server-to-server notifications, records them in PostgreSQL \
            and enqueues data-purge jobs, and signs users in for the app's backend, storing \
            Apple's tokens encrypted (`siwa serve`); runs those jobs, revoking the tokens \
            first, and validates stored tokens daily (`siwa worker`); admins read the audit trail's answers \
            with `siwa audit`. Settings come from SIWA_* environment \
            variables (see `siwa serve --help`, `siwa worker --help` and docs/settings.md).
            The end-to-end demo is a separate development tool, `siwa-demo` (`make demo`).
            `siwa check serve` (or worker) reports every problem of a process's configuration at once.

            \(ExitStatus.table)
            """,
        version: SIWAVersion.description,
        subcommands: [Serve.self, Worker.self, Jobs.self, Users.self, Webhooks.self, Transfer.self, Audit.self, Tokens.self, APIKeys.self, Receipts.self, Erasures.self, Migrate.self, Check.self, Verify.self, Settings.self]
    )
}
