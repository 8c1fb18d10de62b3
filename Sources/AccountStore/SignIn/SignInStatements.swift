import Foundation
import NIOCore
import PostgresNIO

// The sign-in's two calls, each made for a batch of sign-ins in one round
// trip (SignInStore's batchers): one row per sign-in, numbered as given.
// Prepared statements: each connection parses them once.

/// `siwa.sign_in_prepare` (sql/006, sql/008) for each sign-in: the user's
/// ids and the earlier answer for the code. Reads only (and hands out fresh
/// ids), so a batch needs no transaction.
struct SignInPrepareStatement: PostgresPreparedStatement {
    static let sql = """
        SELECT u.ord::int4, p.current_id, p.fresh_id, p.replay_user_id, p.replay_sub, p.replay_is_new, p.replay_stored
        FROM unnest($1::text[], $2::bytea[], $4::text[]) WITH ORDINALITY AS u(sub, code, team, ord)
        CROSS JOIN LATERAL siwa.sign_in_prepare(u.sub, u.team, u.code, $3) AS p
        ORDER BY u.ord
        """
    typealias Row = (Int32, Int64?, Int64, Int64?, String?, Bool?, Bool?)

    struct Input: Sendable {
        let appleSub: String
        let appleTeam: String
        let codeSHA256: Data?
    }

    let inputs: [Input]
    let replayWindowSeconds: Int32

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 4)
        bindings.append(inputs.map(\.appleSub))
        try bindings.append(NullableArray(inputs.map { $0.codeSHA256.map { ByteBuffer(bytes: $0) } }))
        bindings.append(replayWindowSeconds)
        bindings.append(inputs.map(\.appleTeam))
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}

/// `siwa.sign_in` (sql/006) for each sign-in: upserts the user, stores the
/// sealed tokens and the code's hash, and audits it. One statement, so the
/// batch is one transaction; the function's statements see the earlier
/// sign-ins of the batch (two of one user: the second answers `again`).
///
/// Lock order, as the inbox statement's: first the batch's existing users,
/// in (`apple_sub`, `apple_team`) order (`locked`, run before any sign-in: the input scan
/// waits for it), then each sign-in in `apple_sub` order, a user's in the
/// order they came. So a sign-in batch and an inbox batch never lock two
/// existing users in opposite orders. (Two brand-new users inserted by both
/// at once still could; PostgreSQL breaks such a deadlock after a second by
/// failing one batch, whose items are then retried one by one.)
struct SignInStatement: PostgresPreparedStatement {
    static let sql = """
        WITH locked AS MATERIALIZED (
            SELECT u.id
            FROM (SELECT DISTINCT b.sub, b.team FROM unnest($1::text[], $23::text[]) AS b(sub, team) ORDER BY b.sub, b.team) AS batch,
                 LATERAL (SELECT users.id FROM siwa.users WHERE users.apple_sub = batch.sub AND users.apple_team = batch.team
                          FOR UPDATE) AS u
        )
        SELECT u.ord::int4, s.outcome, s.user_id, s.is_new_user, s.user_email, s.user_is_private_email, s.user_real_user_status,
               s.user_email_verified, s.user_given_name, s.user_family_name
        FROM (SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::text[], $5::text[], $6::bool[], $7::text[],
                                   $8::text[], $9::int2[], $10::int8[], $11::bytea[], $12::text[], $13::text[], $14::bytea[],
                                   $15::bytea[], $16::bytea[], $17::bytea[], $18::int4[], $20::bool[], $21::text[], $22::text[],
                                   $23::text[])
                   WITH ORDINALITY AS i(sub, current_id, fresh_id, client_id, email, is_private_email, given_name, family_name,
                                        real_user_status, signed_in_ms, code, api_key, key_id, refresh_for_current,
                                        access_for_current, refresh_for_fresh, access_for_fresh, access_expires_in,
                                        email_verified, org_id, transfer_sub, team, ord)
              WHERE (SELECT count(*) FROM locked) >= 0
              ORDER BY i.sub, i.team, i.ord) AS u
        CROSS JOIN LATERAL siwa.sign_in(u.sub, u.team, u.current_id, u.fresh_id, u.client_id, u.email, u.is_private_email, u.given_name,
                                        u.family_name, u.real_user_status, u.signed_in_ms, u.code, u.api_key, u.key_id,
                                        u.refresh_for_current, u.access_for_current, u.refresh_for_fresh, u.access_for_fresh,
                                        u.access_expires_in, $19, u.email_verified, u.org_id, u.transfer_sub) AS s
        ORDER BY u.ord
        """
    typealias Row = (Int32, String, Int64?, Bool?, String?, Bool?, Int16?, Bool?, String?, String?)

    /// One sign-in: the record, its prepared ids, and the tokens sealed for
    /// the current id and for the fresh one.
    struct Input: Sendable {
        let record: SignInRecord
        let prepared: SignInStore.Prepared
        let forCurrent: SealedTokenPair?
        let forFresh: SealedTokenPair?
        var sealed: SealedTokenPair? { forFresh ?? forCurrent }
    }

    let inputs: [Input]
    let validationPeriodHours: Int

    func makeBindings() throws -> PostgresBindings {
        func bytes(_ data: Data?) -> ByteBuffer? { data.map { ByteBuffer(bytes: $0) } }
        var bindings = PostgresBindings(capacity: 23)
        bindings.append(inputs.map(\.record.appleSub))
        try bindings.append(NullableArray(inputs.map(\.prepared.currentID)))
        bindings.append(inputs.map(\.prepared.freshID))
        bindings.append(inputs.map(\.record.clientID))
        try bindings.append(NullableArray(inputs.map(\.record.email)))
        try bindings.append(NullableArray(inputs.map(\.record.isPrivateEmail)))
        try bindings.append(NullableArray(inputs.map(\.record.givenName)))
        try bindings.append(NullableArray(inputs.map(\.record.familyName)))
        // A value past smallint (none Apple has sent) is not kept: unknown.
        try bindings.append(NullableArray(inputs.map { $0.record.realUserStatus.flatMap { Int16(exactly: $0) } }))
        bindings.append(inputs.map { Int64(($0.record.signedInAt.timeIntervalSince1970 * 1000).rounded()) })
        try bindings.append(NullableArray(inputs.map { bytes($0.record.codeSHA256) }))
        bindings.append(inputs.map(\.record.apiKeyName))
        try bindings.append(NullableArray(inputs.map { $0.sealed?.keyID }))
        try bindings.append(NullableArray(inputs.map { bytes($0.forCurrent?.refreshToken) }))
        try bindings.append(NullableArray(inputs.map { bytes($0.forCurrent?.accessToken) }))
        try bindings.append(NullableArray(inputs.map { bytes($0.forFresh?.refreshToken) }))
        try bindings.append(NullableArray(inputs.map { bytes($0.forFresh?.accessToken) }))
        bindings.append(inputs.map { Int32(clamping: $0.sealed?.accessExpiresIn ?? 0) })
        bindings.append(Int32(clamping: validationPeriodHours))
        try bindings.append(NullableArray(inputs.map(\.record.emailVerified)))
        try bindings.append(NullableArray(inputs.map(\.record.orgID)))
        try bindings.append(NullableArray(inputs.map(\.record.transferSub)))
        bindings.append(inputs.map(\.record.appleTeam))
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
}
