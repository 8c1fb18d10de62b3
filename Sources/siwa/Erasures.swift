import AccountLifecycle
import AccountStore
import AppleSignIn
import ArgumentParser
import Foundation
import SIWAConfiguration

struct Erasures: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The erasure ledger: erase again, after a database restore, the users erased since the backup.",
        discussion: """
            siwa worker appends every completed purge to the erasure ledger, files outside the \
            database (SIWA_ERASURE_LEDGER_DIR, default /var/lib/siwa/erasures): one JSON line \
            each with the Apple sub, the job id, the completion time and the deletion receipt's \
            id, signed with the receipt key, synced before the purge commits. No email, name or \
            token. Restoring a database backup brings back everyone erased after the backup was \
            taken; the ledger is how siwa erases them again.
            """,
        subcommands: [Reapply.self]
    )

    struct Reapply: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "After a restore: enqueue a purge for every sub in the ledger that the database may still hold.",
            discussion: """
                When: right after restoring siwa's database from a backup, with siwa serve and \
                siwa worker stopped, after `siwa migrate`, before starting them again \
                (deploy/README.md, "Restoring a backup"):
                  siwa erasures reapply /var/lib/siwa/erasures/*
                Then start the worker: it runs the purges (revoking any restored Apple token, \
                erasing siwa's data and running the purge plan), each with a new receipt.

                Each line's signature is checked first (ES256, the receipt key's public key set: \
                --jwks FILE, else SIWA_RECEIPT_JWKS_FILE, else the public key of \
                SIWA_RECEIPT_KEY_FILE). A line that does not verify, cannot be read, or is \
                unsigned (a worker with receipts off writes unsigned lines; take them with \
                --accept-unsigned) is refused: printed as `refused FILE:LINE: why`, never \
                acted on. For each line that verifies, siwa.reapply_erasure decides: the user's \
                row is purged in the restored database (already erased), or, for a sub siwa \
                has no row for, the ledger's job completed before the backup (already erased); \
                otherwise a purge is enqueued (or the pending one covers it), with an audit row \
                erasure.reapplied naming the ledger's job id and your database role.
                It is idempotent: a second run enqueues nothing while the first's purges are \
                pending or done (already reapplied). Prints one line per purge enqueued, then \
                the counts. Exit status 0, or 1 when a line was refused (the others were \
                still applied) or the database refused.

                Needs SIWA_DATABASE_URL: your own database role, a member of siwa_admin (it \
                calls siwa.reapply_erasure; admins write no siwa table directly).
                """
        )

        @Argument(help: "The ledger files, e.g. /var/lib/siwa/erasures/* (from the backup of the ledger).")
        var files: [String] = []

        @Option(help: "The receipts' public key set (as `siwa receipts jwks` prints it) to verify the lines with.")
        var jwks: String?

        @Flag(name: .customLong("accept-unsigned"), help: "Also take lines without a signature (a worker with receipts off).")
        var acceptUnsigned = false

        @Flag(name: .customLong("dry-run"), help: "Verify and decide, print what would be done, write nothing.")
        var dryRun = false

        @Option(help: "The team of the subs of lines written before siwa knew of several teams (version 1 lines name none); default: the one team of SIWA_APPLE_TEAM_ID or SIWA_APPLE_CLIENTS_FILE.")
        var team: String?

        func validate() throws {
            guard !files.isEmpty else { throw ValidationError("give the ledger files, e.g. /var/lib/siwa/erasures/*") }
        }

        func run() async throws {
            let keys = ReceiptKeys.load(jwks: jwks)
            let read = Self.read(files, keys: keys, acceptUnsigned: acceptUnsigned)
            for refusal in read.refused { print("refused \(refusal)") }
            let entries = read.entries
            let oldLinesTeam = entries.contains { $0.team == nil } ? Self.teamOfOldLines(team) : ""
            let dryRun = dryRun
            let results = await CommandDatabase.run(label: "siwa.erasures", refusing: ErasureReapplicationError.self) { client, logger in
                let reapplication = ErasureReapplication(client: client, logger: logger)
                var results: [(ErasureLedgerLine.Entry, ErasureReapplication.Outcome, Int64?)] = []
                for entry in entries {
                    let (outcome, jobID) = try await reapplication.reapply(sub: entry.sub, team: entry.team ?? oldLinesTeam,
                                                                           ledgerJobID: entry.jobID,
                                                                           receiptID: entry.receiptID, dryRun: dryRun)
                    results.append((entry, outcome, jobID))
                }
                return results
            }
            let verb = dryRun ? "would enqueue" : "enqueued"
            for (entry, outcome, jobID) in results where outcome == .enqueued || outcome == .pending {
                let job = jobID.map { " job \($0)" } ?? ""
                print(outcome == .enqueued ? "\(verb) \(entry.sub)\(job) (ledger job \(entry.jobID))"
                                           : "pending \(entry.sub)\(job): a purge is already pending (ledger job \(entry.jobID))")
            }
            func count(_ outcome: ErasureReapplication.Outcome) -> Int { results.filter { $0.1 == outcome }.count }
            print("\(dryRun ? "dry run, nothing written: " : "")\(count(.enqueued)) \(dryRun ? "to re-enqueue" : "re-enqueued"), "
                  + "\(count(.pending)) already pending, \(count(.alreadyErased)) already erased, "
                  + "\(count(.alreadyReapplied)) already reapplied, \(read.refused.count) refused")
            if !read.refused.isEmpty { throw ExitCode(1) }
        }

        /// `--team`, else the one team configured: the team of version 1
        /// lines' subs. Refuses when neither says.
        static func teamOfOldLines(_ given: String?) -> String {
            if let given {
                guard SignInSettings.isAppleIdentifier(given) else {
                    Startup.fail("--team: expected 10 upper-case letters and digits, got '\(given.prefix(40))'", code: 2)
                }
                return given
            }
            guard let team = AppleClientsSettings.singleTeam(SettingsReader()) else {
                Startup.fail("the ledger has lines written before siwa knew of several teams (no team): give the team of their subs with --team", code: 2)
            }
            return team
        }

        /// The lines of `files` that verify, each (sub, job id) once, in
        /// order; and the refusals, `FILE:LINE: why`.
        static func read(_ files: [String], keys: ES256KeySet?,
                         acceptUnsigned: Bool) -> (entries: [ErasureLedgerLine.Entry], refused: [String]) {
            var entries: [ErasureLedgerLine.Entry] = []
            var seen = Set<String>()
            var refused: [String] = []
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else {
                    refused.append("\(file): cannot be read")
                    continue
                }
                let text = String(decoding: data, as: UTF8.self)
                let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
                for (index, line) in lines.enumerated() where !line.isEmpty {
                    let place = "\(file):\(index + 1)"
                    // A worker killed mid-write leaves no partial line (the
                    // ledger cuts it back), but a copy may have been cut short.
                    guard index < lines.count - 1 else {
                        refused.append("\(place): the last line has no end (a truncated copy?)")
                        continue
                    }
                    let entry: ErasureLedgerLine.Entry
                    do { entry = try ErasureLedgerLine.verify(line, keys: keys) } catch {
                        refused.append("\(place): \(error)")
                        continue
                    }
                    guard entry.keyID != nil || acceptUnsigned else {
                        refused.append("\(place): unsigned (a worker with receipts off wrote it); take such lines with --accept-unsigned")
                        continue
                    }
                    guard seen.insert("\(entry.jobID) \(entry.sub)").inserted else { continue }
                    entries.append(entry)
                }
            }
            return (entries, refused)
        }
    }
}
