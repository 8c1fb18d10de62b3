import ArgumentParser

/// `siwa audit`: the audit trail, for admins and auditors.
struct Audit: AsyncParsableCommand {
    static let usage = """
        Needs SIWA_DATABASE_URL: a role that can read siwa.audit_log and siwa.audit_chain (your own \
        role, a member of siwa_auditor or siwa_admin), not the service's.
        """

    static let configuration = CommandConfiguration(
        abstract: "The audit trail: verify its hash chain, print its head.",
        discussion: usage,
        subcommands: [AuditVerify.self, AuditHead.self]
    )
}
