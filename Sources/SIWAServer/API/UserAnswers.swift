import AccountStore
import AppleSignIn
import Foundation

/// `GET /v1/users/{sub}`: every field present, null when unset (the app's
/// backend reads a missing value as null, not as a missing key), and the
/// purge null when none is pending. `real_user_status` is 0, 1 or 2: a
/// value Apple may add outside them is answered 1 (unknown), as stored.
struct UserAnswer: Encodable {
    let user: UserView

    enum CodingKeys: String, CodingKey {
        case userID = "user_id", appleSub, team, clientID = "client_id", status, email, emailVerified, isPrivateEmail, realUserStatus, emailForwardingEnabled
        case givenName, familyName, orgID = "org_id", createdAt, lastSignInAt, refreshToken, purge
    }

    struct RefreshToken: Encodable {
        let stored: Bool
        let lastValidatedAt: Date?

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(stored, forKey: .stored)
            try container.encode(lastValidatedAt, forKey: .lastValidatedAt)
        }

        enum CodingKeys: String, CodingKey { case stored, lastValidatedAt }
    }

    /// `waiting`: a consent revocation's purge in its grace delay; `run_at`:
    /// when it (or a pending purge's next attempt) runs.
    struct Purge: Encodable {
        let jobID: Int64
        let state: String
        let waiting: Bool
        let runAt: Date?

        enum CodingKeys: String, CodingKey { case jobID = "job_id", state, waiting, runAt }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(jobID, forKey: .jobID)
            try container.encode(state, forKey: .state)
            try container.encode(waiting, forKey: .waiting)
            try container.encode(runAt, forKey: .runAt)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(user.userID, forKey: .userID)
        try container.encode(user.appleSub, forKey: .appleSub)
        try container.encode(user.appleTeam, forKey: .team)
        try container.encode(user.clientID, forKey: .clientID)
        try container.encode(user.status, forKey: .status)
        try container.encode(user.email, forKey: .email)
        try container.encode(user.emailVerified, forKey: .emailVerified)
        try container.encode(user.isPrivateEmail, forKey: .isPrivateEmail)
        try container.encode(user.realUserStatus.map { RealUserStatus(claim: $0).rawValue }, forKey: .realUserStatus)
        try container.encode(user.emailForwardingEnabled, forKey: .emailForwardingEnabled)
        try container.encode(user.givenName, forKey: .givenName)
        try container.encode(user.familyName, forKey: .familyName)
        try container.encode(user.orgID, forKey: .orgID)
        try container.encode(user.createdAt, forKey: .createdAt)
        try container.encode(user.lastSignInAt, forKey: .lastSignInAt)
        try container.encode(RefreshToken(stored: user.refreshTokenStored, lastValidatedAt: user.lastValidatedAt), forKey: .refreshToken)
        let purge = user.purgeJobID.map { Purge(jobID: $0, state: user.purgeState ?? "unknown", waiting: user.purgeWaiting, runAt: user.purgeRunAt) }
        try container.encode(purge, forKey: .purge)
    }
}

/// `DELETE /v1/users/{sub}`: `apple_revocation` and its URL only where the
/// docs/http-api.md says (absent, not null, for a user purged before).
struct DeletionAnswer: Encodable {
    let status: String
    let jobID: Int64
    let jobState: String
    let appleRevocation: String?
    let appleRevocationURL: String?

    enum CodingKeys: String, CodingKey {
        case status, jobID = "job_id", jobState, appleRevocation, appleRevocationURL = "apple_revocation_url"
    }
}
