/// How the queue's statements write a job's audit rows, whatever its kind:
/// each row names the Apple user the job is about (the trail's `apple_sub`
/// and `apple_team` columns; the app-event trigger and the receipts read the
/// job's rows by it). Every kind's args carry that user under the same keys
/// (sql/008, sql/014, sql/024), so this is the one place the queue learns
/// where: its statements read no kind's arguments themselves.
enum JobAuditRow {
    /// The start of the insert of a job's audit rows: actor, action, the
    /// job's user, details.
    static let insert = "INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)"

    /// The SQL expressions of the user (sub, team) of the job whose args
    /// are `args` (a column reference such as `j.args`), as two columns. A
    /// job whose args name no team (made by hand, or forged) names no user:
    /// its rows must still be written (the trail refuses a sub without its
    /// team), or the job could never be failed or discarded.
    static func user(_ args: String) -> String { "\(sub(args)), \(args)->>'apple_team'" }

    /// The same, named `subject` and `subject_team`, for a RETURNING list.
    static func subject(_ args: String) -> String { "\(sub(args)) AS subject, \(args)->>'apple_team' AS subject_team" }

    private static func sub(_ args: String) -> String {
        "CASE WHEN \(args)->>'apple_team' IS NOT NULL THEN \(args)->>'apple_sub' END"
    }

    /// The columns `subject(_:)` named, of relation `relation` (or unqualified).
    static func subjectColumns(_ relation: String? = nil) -> String {
        relation.map { "\($0).subject, \($0).subject_team" } ?? "subject, subject_team"
    }
}
