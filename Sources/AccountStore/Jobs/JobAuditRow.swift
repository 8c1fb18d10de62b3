/// How the queue's statements write a job's audit rows, whatever its kind:
/// each row names the Apple user the job is about (the trail's `apple_sub`
/// column; the app-event trigger and the receipts read the job's rows by
/// it). Every kind's args carry that user under the same key (sql/008,
/// sql/014), so this is the one place the queue learns where: its
/// statements read no kind's arguments themselves.
enum JobAuditRow {
    /// The start of the insert of a job's audit rows: actor, action, the
    /// job's user, details.
    static let insert = "INSERT INTO siwa.audit_log (actor, action, apple_sub, details)"

    /// The SQL expression of the user of the job whose args are `args`
    /// (a column reference such as `j.args`).
    static func user(_ args: String) -> String { "\(args)->>'apple_sub'" }
}
