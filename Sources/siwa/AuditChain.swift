import AccountLifecycle
import AccountStore
import AppleSignIn
import ArgumentParser
import Foundation
import SIWAConfiguration

/// `siwa audit verify`: recomputes the hash chain (docs/audit-and-receipts.md, "The hash chain").
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
            --head FILE: a signed head (`siwa audit head --signed`, or the signed_head the worker \
            logs), checked first against the receipt key set (--jwks FILE, else \
            SIWA_RECEIPT_JWKS_FILE, else the public key of SIWA_RECEIPT_KEY_FILE): an owner who \
            rewrote rows and recomputed the chain can neither match it nor sign another.
            """ + "\n" + Audit.usage
    )

    @Option(help: ArgumentHelp("A head recorded earlier that must still be in the chain: SEQ:HASH, or a file holding a signed head.",
                               valueName: "SEQ:HASH|FILE"))
    var head: String?

    @Option(help: "The key set that verifies a signed --head (default: SIWA_RECEIPT_JWKS_FILE, else SIWA_RECEIPT_KEY_FILE's key).")
    var jwks: String?

    func validate() throws {
        if let head, AuditChainLink(head) == nil, !FileManager.default.fileExists(atPath: head) {
            throw Audit.badArgument("--head must be SEQ:HASH (a seq, a colon, 64 hex digits), as `siwa audit head` prints it, "
                                    + "or a file holding a signed head (`siwa audit head --signed`), got '\(head)'")
        }
    }

    /// The head to find in the chain: SEQ:HASH as given, or a signed head's
    /// once its signature checks out (else the command ends, exit status 1).
    func expectedHead() -> AuditChainLink? {
        guard let head else { return nil }
        if let link = AuditChainLink(head) { return link }
        guard let data = FileManager.default.contents(atPath: head) else { Startup.fail("--head: cannot read \(head)", code: 1) }
        guard let keys = ReceiptKeys.load(jwks: jwks) else {
            Startup.fail("--head \(head): a signed head needs the receipt key set: --jwks FILE, SIWA_RECEIPT_JWKS_FILE or SIWA_RECEIPT_KEY_FILE", code: 1)
        }
        do {
            let (signed, keyID) = try SignedAuditHead.verify(String(decoding: data, as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines), keys: keys)
            guard let link = signed.link else { Startup.fail("--head \(head): no head in it", code: 1) }
            print("signed head: seq \(signed.head.seq), sealed at \(signed.head.sealedAt), signed by key \(keyID) for \(signed.iss)")
            return link
        } catch {
            print("refused: --head \(head) is not a valid signed head: \(error)")
            Foundation.exit(1)
        }
    }

    func run() async throws {
        let expected = expectedHead()
        let report = await CommandDatabase.run(label: "siwa.audit", refusing: AuditRefusal.self) { client, logger in
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

/// `siwa audit head`: the last sealed row, as `SEQ:HASH`, or signed.
struct AuditHead: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "head",
        abstract: "Print the audit chain's head, SEQ:HASH (keep it elsewhere; check it later with `siwa audit verify --head`).",
        discussion: """
            --signed prints it as a compact JWS (ES256, typ siwa-audit-head+jwt: seq, row_hash, \
            sealed_at) signed with the deletion receipts' key (SIWA_RECEIPT_KEY_FILE, iss \
            SIWA_RECEIPT_ISSUER), the one line on standard output: keep the file where the \
            database's owner cannot reach it (another host, a ticket, a printout), and check it \
            later with `siwa audit verify --head FILE`. siwa worker logs one (signed_head) with \
            every head it logs when receipts are on.
            """ + "\n" + Audit.usage
    )

    @Flag(help: "Sign the head with the receipt key (SIWA_RECEIPT_KEY_FILE, SIWA_RECEIPT_ISSUER).")
    var signed = false

    func run() async throws {
        if signed { return await runSigned() }
        let (head, unsealed) = await CommandDatabase.run(label: "siwa.audit", refusing: AuditRefusal.self) { client, logger in
            try await AuditSealer(client: client, logger: logger).head()
        }
        guard let head else {
            print("no head yet: nothing is sealed (\(unsealed) rows written; siwa worker seals them)")
            Foundation.exit(1)
        }
        print(head)
    }
}

extension AuditHead {
    /// The key is read before the database is asked anything: a missing or
    /// bad one is one line naming the setting (exit status 2).
    func runSigned() async {
        let env = Startup.reader()
        let receipts = Startup.settings { try ReceiptSettings.read(env) }
        guard let settings = receipts else {
            Startup.fail("--signed needs the receipt key: set SIWA_RECEIPT_KEY_FILE and SIWA_RECEIPT_ISSUER (as for siwa worker)")
        }
        let signer = Startup.settings { try settings.signer() }
        let head = await CommandDatabase.run(label: "siwa.audit", refusing: AuditRefusal.self) { client, logger in
            try await AuditSealer(client: client, logger: logger).sealedHead()
        }
        guard let head else {
            print("no head yet: nothing is sealed (siwa worker seals the audit log)")
            Foundation.exit(1)
        }
        do {
            print(try signer.sign(head: head.head, sealedAt: head.sealedAt))
        } catch {
            Startup.fail("cannot sign the head: \(error)", code: 1)
        }
    }
}
