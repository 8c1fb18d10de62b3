import AccountStore
import ArgumentParser
import Foundation
import SIWAConfiguration

/// `siwa audit verify`: recomputes the hash chain (README.md, "The audit trail").
struct AuditVerify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Walk the audit log's hash chain: `ok: N rows, head SEQ HASH` (exit 0), or where it breaks and why (exit 1).",
        discussion: """
            Recomputes every sealed row's hash from the row itself, in seq order, streaming (a \
            million rows take seconds and little memory). The newest rows are sealed by siwa \
            worker a second or two after they are written; until then they are counted as not \
            yet sealed.
            --head SEQ:HASH (a head logged by siwa worker, or printed by `siwa audit head`, kept \
            where the database's superuser cannot change it) must still be in the chain with the \
            same hash: this catches a tail cut off, or the whole chain rewritten from an edit on.
            """ + "\n" + Audit.usage
    )

    @Option(help: ArgumentHelp("A head recorded earlier that must still be in the chain.", valueName: "SEQ:HASH"))
    var head: String?

    func validate() throws {
        if let head, AuditChainLink(head) == nil {
            throw ValidationError("--head must be SEQ:HASH (a seq, a colon, 64 hex digits), as `siwa audit head` prints it")
        }
    }

    func run() async throws {
        let expected = head.flatMap(AuditChainLink.init)
        let report = await CommandDatabase.run(label: "siwa.audit", refusing: SettingError.self) { client, logger in
            try await AuditChainVerifier(client: client, logger: logger).verify(expectedHead: expected)
        }
        if let failure = report.failure {
            print("broken at seq \(failure.seq): \(failure.reason)")
            print("(\(report.sealed) rows before it verified)")
            Foundation.exit(1)
        }
        var line = "ok: \(report.sealed) rows, " + (report.head.map { "head \($0.seq) \($0.hashHex)" } ?? "no head yet")
        if let expected { line += ", recorded head \(expected.seq) in the chain" }
        if report.unsealed > 0 { line += "; \(report.unsealed) not yet sealed" }
        print(line)
    }
}

/// `siwa audit head`: the last sealed row, as `SEQ:HASH`.
struct AuditHead: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "head",
        abstract: "Print the audit chain's head, SEQ:HASH (keep it elsewhere; check it later with `siwa audit verify --head`).",
        discussion: Audit.usage
    )

    func run() async throws {
        let (head, unsealed) = await CommandDatabase.run(label: "siwa.audit", refusing: SettingError.self) { client, logger in
            try await AuditSealer(client: client, logger: logger).head()
        }
        guard let head else {
            print("no head yet: nothing is sealed (\(unsealed) rows written; siwa worker seals them)")
            Foundation.exit(1)
        }
        print(head)
    }
}
