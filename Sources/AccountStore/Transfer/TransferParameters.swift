import Foundation

/// What a transfer job's args hold, as siwa.start_transfer_prepare and
/// siwa.start_transfer_complete (sql/023) write them: the user, by siwa id
/// (and `apple_sub` and `apple_team`, the old sub and its team, for the
/// queue's audit rows; none for an imported user), the receiving team and
/// the client id Apple's calls name.
public protocol TransferJobParameters: JobParameters {
    var appleSub: String? { get }
    var appleTeam: String? { get }
    var userID: Int64 { get }
    var team: String { get }
    var clientID: String { get }
}

enum TransferArgumentKeys: String, CodingKey {
    case appleSub = "apple_sub"
    case appleTeam = "apple_team"
    case userID = "user_id"
    case team
    case clientID = "client_id"
}

/// Which half of an app transfer a job is: its kind's name.
public protocol TransferPhase: Sendable {
    static var kind: String { get }
}

/// The sending team's half: ask Apple for the user's transfer_sub toward `team`.
public enum TransferPreparePhase: TransferPhase {
    public static let kind = "transfer_prepare"
}

/// The receiving team's half: exchange the user's transfer_sub for the sub
/// of `team` (this siwa's team now) and move the user to it.
public enum TransferCompletePhase: TransferPhase {
    public static let kind = "transfer_complete"
}

/// A transfer job's args; the two kinds differ only in their phase.
public struct TransferArguments<Phase: TransferPhase>: TransferJobParameters, Equatable {
    public static var kind: String { Phase.kind }
    public var appleSub: String?
    /// The team the user is in now (the sending team's while preparing).
    public var appleTeam: String?
    public var userID: Int64
    public var team: String
    public var clientID: String

    public init(appleSub: String?, appleTeam: String?, userID: Int64, team: String, clientID: String) {
        self.appleSub = appleSub
        self.appleTeam = appleTeam
        self.userID = userID
        self.team = team
        self.clientID = clientID
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: TransferArgumentKeys.self)
        appleSub = c.text(.appleSub)
        appleTeam = c.text(.appleTeam)
        userID = try c.decode(Int64.self, forKey: .userID)
        team = try c.decode(String.self, forKey: .team)
        clientID = try c.decode(String.self, forKey: .clientID)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: TransferArgumentKeys.self)
        try c.encodeIfPresent(appleSub, forKey: .appleSub)
        try c.encodeIfPresent(appleTeam, forKey: .appleTeam)
        try c.encode(userID, forKey: .userID)
        try c.encode(team, forKey: .team)
        try c.encode(clientID, forKey: .clientID)
    }
}

public typealias TransferPrepareParameters = TransferArguments<TransferPreparePhase>
public typealias TransferCompleteParameters = TransferArguments<TransferCompletePhase>
