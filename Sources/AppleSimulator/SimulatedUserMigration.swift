import Crypto
import Foundation
import HTTPTypes
import Hummingbird

/// What the simulated Apple knows of app transfers between teams (TN3159):
/// the `user.migration` access tokens it issued, the transfer identifiers
/// it handed the sending team, the app transfers done, and the addresses
/// users share with each team.
struct UserMigrationState {
    struct AccessToken {
        let team: String
        let clientID: String
        let expiresAt: Date
    }

    struct Transfer {
        let fromTeam: String
        let sub: String
        let target: String
    }

    /// Apple's example answers `"expires_in":3600`.
    static let tokenLifetime = 3600

    var tokens: [String: AccessToken] = [:]
    /// transfer_sub to the user and teams it was made for.
    var transfers: [String: Transfer] = [:]
    /// "FROM>TO": the app moved from team FROM to team TO (`transferApp`).
    var appTransfers: Set<String> = []
    /// "TEAM|SUB": the address the user shares with that team.
    var emails: [String: String] = [:]
    /// A sub or transfer_sub Apple refuses, with its error code.
    var refusals: [String: String] = [:]
    var behaviour = SimulatedEndpointBehaviour.normal
    var tokenRequests = 0
    var requests = 0
    var requestTimes: [ContinuousClock.Instant] = []
    var lastForm: [String: String]?

    mutating func issueToken(team: String, clientID: String, now: Date) -> String {
        tokenRequests += 1
        let token = AppleSimulator.randomToken(prefix: "m")
        tokens[token] = AccessToken(team: team, clientID: clientID, expiresAt: now.addingTimeInterval(TimeInterval(Self.tokenLifetime)))
        return token
    }
}

/// `POST /auth/usermigrationinfo`, both ways, as Apple documents it: a form
/// with `client_id` and `client_secret` (the calling team's, which names
/// the team) and `Authorization: Bearer` with a `user.migration` access
/// token of that team and client (from `/auth/token`, `grant_type=
/// client_credentials`). With `sub` and `target`, the sending team gets the
/// user's `transfer_sub`; with `transfer_sub`, the receiving team (once the
/// app moved: `transferApp`) gets the user's `sub` for its team and, for a
/// user of Hide My Email, a relay address for its team. The identifiers
/// are deterministic (`transferSub(of:from:to:)`,
/// `transferredSub(of:from:to:)`), so tests know what to expect.
///
/// Where Apple's documents are silent (README, "How the simulator differs
/// from Apple"): a missing, unknown or expired bearer token, or one of
/// another team, is answered 401 `invalid_client`; an unknown
/// transfer_sub, or one made for another team, 400 `invalid_grant`; an
/// exchange before the app moved, 400 `invalid_request`.
extension AppleSimulator {
    // MARK: Set-up

    /// The app moved from team `from` to team `to`: the receiving team's
    /// exchanges work from now on, and its identity tokens carry
    /// `transfer_sub` (`transferredSignIn`).
    public func transferApp(from: String, to: String) {
        tokenState.withLock { _ = $0.migration.appTransfers.insert("\(from)>\(to)") }
    }

    /// The address the user `sub` of team `team` shares with the app (a
    /// `@privaterelay.appleid.com` one gets a new one for the receiving team).
    public func setUserEmail(_ email: String, sub: String, team: String) {
        tokenState.withLock { $0.migration.emails["\(team)|\(sub)"] = email }
    }

    /// Answers 400 `{"error": error}` for this sub (sending side) or
    /// transfer_sub (receiving side).
    public func refuseUserMigration(of identifier: String, error: String) {
        tokenState.withLock { $0.migration.refusals[identifier] = error }
    }

    public func setUserMigrationBehaviour(_ behaviour: SimulatedEndpointBehaviour) {
        tokenState.withLock { $0.migration.behaviour = behaviour }
    }

    /// Expires every `user.migration` access token issued so far.
    public func expireMigrationTokens() {
        tokenState.withLock { state in
            for token in Array(state.migration.tokens.keys) {
                if let old = state.migration.tokens[token] {
                    state.migration.tokens[token] = .init(team: old.team, clientID: old.clientID, expiresAt: .distantPast)
                }
            }
        }
    }

    // MARK: Observations

    /// `/auth/usermigrationinfo` requests, answered or not.
    public var userMigrationRequests: Int { tokenState.withLock { $0.migration.requests } }
    /// When each arrived, in order (their rate).
    public var userMigrationRequestTimes: [ContinuousClock.Instant] { tokenState.withLock { $0.migration.requestTimes } }
    /// The last form `/auth/usermigrationinfo` received, decoded (nil if unreadable).
    public var lastUserMigrationForm: [String: String]? { tokenState.withLock { $0.migration.lastForm } }
    /// `client_credentials` access tokens issued.
    public var migrationTokensIssued: Int { tokenState.withLock { $0.migration.tokenRequests } }

    // MARK: The identifiers

    /// The transfer identifier of team `from`'s user `sub` toward team `to`.
    public static func transferSub(of sub: String, from: String, to: String) -> String {
        shaped(SHA256.hash(data: Data("transfer|\(from)|\(sub)|\(to)".utf8)))
    }

    /// The user's `sub` in team `to` after the app moved there from `from`.
    public static func transferredSub(of sub: String, from: String, to: String) -> String {
        shaped(SHA256.hash(data: Data("sub|\(from)|\(sub)|\(to)".utf8)))
    }

    /// The relay address team `to` gets for a user of Hide My Email.
    public static func transferredRelayEmail(of sub: String, from: String, to: String) -> String {
        let hex = SHA256.hash(data: Data("relay|\(from)|\(sub)|\(to)".utf8)).map { String(format: "%02x", $0) }.joined()
        return "\(hex.prefix(10))@privaterelay.appleid.com"
    }

    /// Apple's shape: `NNNNNN.<32 hex>.NNNN`.
    private static func shaped(_ digest: SHA256.Digest) -> String {
        let bytes = Array(digest)
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        let head = (Int(bytes[0]) << 16 | Int(bytes[1]) << 8 | Int(bytes[2])) % 1_000_000
        let tail = (Int(bytes[3]) << 8 | Int(bytes[4])) % 10_000
        let middle = String(hex.dropFirst(10).prefix(32))
        return String(format: "%06ld", head) + "." + middle + "." + String(format: "%04ld", tail)
    }

    /// Team `from`'s user `sub` signs in to the app after it moved to team
    /// `to`: the identity token carries the user's sub for `to`, its relay
    /// address for `to` (Hide My Email), and `transfer_sub`, as Apple's do
    /// "for all migrated users who sign into your application after the
    /// transfer" (none before `transferApp`).
    public func transferredSignIn(sub: String, from: String, to: String, clientID: String, nonce: String? = nil) throws -> SimulatedSignIn {
        let (moved, email) = tokenState.withLock { state in
            (state.migration.appTransfers.contains("\(from)>\(to)"), state.migration.emails["\(from)|\(sub)"])
        }
        let relay = email.map { $0.lowercased().hasSuffix("@privaterelay.appleid.com") } == true
            ? Self.transferredRelayEmail(of: sub, from: from, to: to) : email
        return try signIn(sub: Self.transferredSub(of: sub, from: from, to: to), clientID: clientID, email: relay, nonce: nonce,
                          transferSub: moved ? Self.transferSub(of: sub, from: from, to: to) : nil)
    }

    // MARK: The endpoint

    private enum MigrationDecision {
        case refuse(HTTPResponse.Status, String)
        case answer([String: any Sendable])
    }

    func answerUserMigration(_ request: Request, context: SimulatorRequestContext) async throws -> Response {
        let (form, isForm) = await Self.readForm(request)
        let behaviour = tokenState.withLock { state in
            state.migration.requests += 1
            state.migration.requestTimes.append(.now)
            state.migration.lastForm = form
            return state.migration.behaviour
        }
        let stalling = { @Sendable in self.tokenState.withLock { $0.migration.behaviour == behaviour } }
        if let response = await Self.misbehave(behaviour, context: context, stalling: stalling) { return response }
        guard isForm, let form else { return Self.error("invalid_request") }
        let authorization = request.headers[.authorization]
        let decision = tokenState.withLock { state -> MigrationDecision in
            let now = state.now()
            guard let clientID = form["client_id"], let secret = form["client_secret"],
                  let team = ClientSecretCheck.team(of: secret, clientID: clientID, state: &state) else {
                return .refuse(.badRequest, "invalid_client")
            }
            guard let bearer = authorization, bearer.hasPrefix("Bearer "),
                  let token = state.migration.tokens[String(bearer.dropFirst("Bearer ".count))],
                  token.team == team, token.clientID == clientID, token.expiresAt > now else { return .refuse(.unauthorized, "invalid_client") }
            if let sub = form["sub"], let target = form["target"], form["transfer_sub"] == nil {
                // The sending team.
                guard !sub.isEmpty, target.count == 10, target.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }),
                      target != team else { return .refuse(.badRequest, "invalid_request") }
                if let error = state.migration.refusals[sub] { return .refuse(.badRequest, error) }
                let transferSub = Self.transferSub(of: sub, from: team, to: target)
                state.migration.transfers[transferSub] = .init(fromTeam: team, sub: sub, target: target)
                return .answer(["transfer_sub": transferSub])
            }
            if let transferSub = form["transfer_sub"], form["sub"] == nil, form["target"] == nil {
                // The receiving team.
                if let error = state.migration.refusals[transferSub] { return .refuse(.badRequest, error) }
                guard let transfer = state.migration.transfers[transferSub], transfer.target == team else {
                    return .refuse(.badRequest, "invalid_grant")
                }
                guard state.migration.appTransfers.contains("\(transfer.fromTeam)>\(team)") else { return .refuse(.badRequest, "invalid_request") }
                var answer: [String: any Sendable] = ["sub": Self.transferredSub(of: transfer.sub, from: transfer.fromTeam, to: team)]
                // "This attribute returns only if the user utilized a private email address".
                if let email = state.migration.emails["\(transfer.fromTeam)|\(transfer.sub)"],
                   email.lowercased().hasSuffix("@privaterelay.appleid.com") {
                    answer["email"] = Self.transferredRelayEmail(of: transfer.sub, from: transfer.fromTeam, to: team)
                    answer["is_private_email"] = true
                }
                return .answer(answer)
            }
            return .refuse(.badRequest, "invalid_request")
        }
        switch decision {
        case .refuse(let status, let code): return Self.json(status, ["error": code])
        case .answer(let answer): return Self.json(.ok, answer)
        }
    }
}
