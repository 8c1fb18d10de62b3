import Foundation
import PostgresNIO

// The sign-in's two calls as prepared statements: every sign-in makes them,
// so each connection parses them once (GuardedConnection's guardedExecute).

/// `siwa.sign_in_prepare` (sql/006, sql/008): the user's ids and the earlier
/// answer for this code.
struct SignInPrepareStatement: PostgresPreparedStatement {
    static let sql = """
        SELECT current_id, fresh_id, replay_user_id, replay_sub, replay_is_new, replay_stored
        FROM siwa.sign_in_prepare($1, $2, $3)
        """
    typealias Row = (Int64?, Int64, Int64?, String?, Bool?, Bool?)

    let appleSub: String
    let codeSHA256: Data?
    let replayWindowSeconds: Int32

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 3)
        bindings.append(appleSub)
        try bindings.append(codeSHA256)
        bindings.append(replayWindowSeconds)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}

/// `siwa.sign_in` (sql/006): one transaction that upserts the user, stores
/// the sealed tokens and the code's hash, and audits it.
struct SignInStatement: PostgresPreparedStatement {
    static let sql = """
        SELECT outcome, user_id, is_new_user, user_email, user_is_private_email, user_real_user_status
        FROM siwa.sign_in($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
        """
    typealias Row = (String, Int64?, Bool?, String?, Bool?, Int16?)

    let record: SignInRecord
    let prepared: SignInStore.Prepared
    /// The tokens sealed for the current id and for the fresh one.
    let forCurrent: SealedTokenPair?
    let forFresh: SealedTokenPair?
    let validationPeriodHours: Int

    func makeBindings() throws -> PostgresBindings {
        let r = record
        let sealed = forFresh ?? forCurrent
        var bindings = PostgresBindings(capacity: 19)
        bindings.append(r.appleSub)
        bindings.append(prepared.currentID)
        bindings.append(prepared.freshID)
        bindings.append(r.clientID)
        bindings.append(r.email)
        bindings.append(r.isPrivateEmail)
        bindings.append(r.givenName)
        bindings.append(r.familyName)
        bindings.append(r.realUserStatus.map(Int16.init))
        bindings.append(Int64((r.signedInAt.timeIntervalSince1970 * 1000).rounded()))
        try bindings.append(r.codeSHA256)
        bindings.append(r.apiKeyName)
        bindings.append(sealed?.keyID)
        try bindings.append(forCurrent?.refreshToken)
        try bindings.append(forCurrent?.accessToken)
        try bindings.append(forFresh?.refreshToken)
        try bindings.append(forFresh?.accessToken)
        bindings.append(Int32(clamping: sealed?.accessExpiresIn ?? 0))
        bindings.append(Int32(clamping: validationPeriodHours))
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}
