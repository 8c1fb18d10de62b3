import Foundation
import Synchronization

/// Apple's user migration for an app transfer between teams (TN3159; Apple's
/// words in docs/apple-sources.md §8): an access token from `/auth/token`
/// with `grant_type=client_credentials` and `scope=user.migration`, then
/// `/auth/usermigrationinfo` with it as the bearer, both ways:
///
/// - the sending team: `sub` and `target` (the receiving team's id) for
///   the user's `transfer_sub` (`transferSub(of:target:clientID:)`);
/// - the receiving team: `transfer_sub` for the user's new `sub`, and, for a
///   user of Hide My Email, the relay address for the new team (`exchange`).
///
/// The access token is one for the team (Apple: "fetching the access token
/// for the entire developer team"), kept per client id until shortly before
/// its `expires_in`, fetched once for concurrent callers, and dropped when
/// Apple refuses a call with it. Every call has the client's deadline. Like
/// `AppleAuthClient`, nothing it returns or prints holds a token or a secret.
public final class AppleUserMigration: Sendable {
    public let client: AppleAuthClient
    private let now: @Sendable () -> ContinuousClock.Instant
    private let tokens = Mutex<[String: Task<AppleMigrationOutcome<MigrationAccessToken>, Never>]>([:])

    public init(client: AppleAuthClient, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.client = client
        self.now = now
    }

    /// The sending team: the user's transfer identifier toward `target`.
    public func transferSub(of sub: String, target: String, clientID: String) async -> AppleMigrationOutcome<String> {
        await call(clientID: clientID, fields: [("sub", sub), ("target", target)]) { body in
            struct Answer: Decodable { let transfer_sub: String }
            guard let answer = try? JSONDecoder().decode(Answer.self, from: body), Self.isIdentifier(answer.transfer_sub) else { return nil }
            return answer.transfer_sub
        }
    }

    /// The receiving team: the user's new `sub` (and relay address) for a
    /// transfer identifier the sending team obtained.
    public func exchange(transferSub: String, clientID: String) async -> AppleMigrationOutcome<AppleMigratedUser> {
        await call(clientID: clientID, fields: [("transfer_sub", transferSub)]) { body in
            guard let user = try? JSONDecoder().decode(AppleMigratedUser.self, from: body), Self.isIdentifier(user.sub) else { return nil }
            return user
        }
    }

    /// A sub or transfer_sub as Apple shapes them: 1 to 255 printable ASCII
    /// characters, no space.
    static func isIdentifier(_ value: String) -> Bool {
        (1...255).contains(value.utf8.count) && value.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }

    private func call<Value: Sendable & Equatable>(clientID: String, fields: [(String, String)],
                             decode: @Sendable (Data) -> Value?) async -> AppleMigrationOutcome<Value> {
        let token: MigrationAccessToken
        switch await accessToken(clientID: clientID) {
        case .success(let fresh): token = fresh
        case .invalidGrant: return .invalidGrant
        case .invalidClient: return .invalidClient
        case .rejected(let status, let error): return .rejected(status: status, error: error)
        case .unavailable(let retryAfter, let reason): return .unavailable(retryAfter: retryAfter, reason: "access token: \(reason)")
        }
        let answer = await client.post(path: "/auth/usermigrationinfo", fields: fields, clientID: clientID, bearer: token.value)
        let outcome = AppleMigrationOutcome(answer, expecting: "a user migration answer", decode: decode)
        if case .invalidClient = outcome {
            // Perhaps the access token (expired early, or revoked): the next call gets a new one.
            forget(clientID: clientID)
        }
        return outcome
    }

    /// The cached access token, or a new one (one request for all callers waiting).
    func accessToken(clientID: String) async -> AppleMigrationOutcome<MigrationAccessToken> {
        for _ in 0..<2 {
            let task = tokens.withLock { tokens -> Task<AppleMigrationOutcome<MigrationAccessToken>, Never> in
                if let task = tokens[clientID] { return task }
                let client = self.client, now = self.now
                let task = Task { await Self.fetch(client: client, clientID: clientID, now: now) }
                tokens[clientID] = task
                return task
            }
            let outcome = await task.value
            guard case .success(let token) = outcome else {
                // Not kept: the next call asks again.
                tokens.withLock { if $0[clientID] == task { $0[clientID] = nil } }
                return outcome
            }
            if now() < token.renewAt { return outcome }
            tokens.withLock { if $0[clientID] == task { $0[clientID] = nil } }
        }
        return .unavailable(retryAfter: nil, reason: "the access token Apple answered expires at once")
    }

    /// Drops the cached token (a newer one fetched meanwhile goes too: one
    /// more request, no harm).
    private func forget(clientID: String) {
        tokens.withLock { $0[clientID] = nil }
    }

    private static func fetch(client: AppleAuthClient, clientID: String,
                              now: @Sendable () -> ContinuousClock.Instant) async -> AppleMigrationOutcome<MigrationAccessToken> {
        let fields = [("grant_type", "client_credentials"), ("scope", "user.migration")]
        let answer = await client.post(path: "/auth/token", fields: fields, clientID: clientID)
        return AppleMigrationOutcome(answer, expecting: "a token response") { body in
            guard let response = AppleTokenResponse.decoding(body), !response.accessToken.isEmpty,
                  response.expiresIn > 0 else { return nil }
            return MigrationAccessToken(value: response.accessToken, renewAt: now() + renewal(after: response.expiresIn))
        }
    }

    /// How long a token of `expiresIn` seconds is used: its lifetime less a
    /// tenth (at least a minute, at most half of it), so no call leaves with
    /// a token about to expire in flight.
    static func renewal(after expiresIn: Int) -> Duration {
        let margin = min(max(expiresIn / 10, 60), expiresIn / 2)
        return .seconds(expiresIn - margin)
    }
}

/// An access token for `user.migration` and when to stop using it.
/// Printed, it shows neither.
struct MigrationAccessToken: Sendable, Equatable, CustomStringConvertible {
    let value: String
    let renewAt: ContinuousClock.Instant
    var description: String { "MigrationAccessToken(<\(value.utf8.count) bytes>)" }
}

/// The receiving team's answer: the user's `sub` for this team, and, only
/// for a user of Hide My Email, the relay address for this team. Printed,
/// it shows the sub and whether an address came, never the address.
public struct AppleMigratedUser: Sendable, Equatable, Decodable, CustomStringConvertible {
    public let sub: String
    public let email: String?
    public let isPrivateEmail: Bool?

    enum CodingKeys: String, CodingKey {
        case sub, email
        case isPrivateEmail = "is_private_email"
    }

    public init(sub: String, email: String?, isPrivateEmail: Bool?) {
        self.sub = sub
        self.email = email
        self.isPrivateEmail = isPrivateEmail
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        sub = try c.decode(String.self, forKey: .sub)
        // An empty address is none (as the identity token's, sql/022).
        email = try c.decodeIfPresent(String.self, forKey: .email).flatMap { $0.isEmpty ? nil : $0 }
        isPrivateEmail = try c.decodeIfPresent(FlexibleBool.self, forKey: .isPrivateEmail)?.value
    }

    public var description: String { "AppleMigratedUser(sub: \(sub), email: \(email == nil ? "none" : "given"))" }
}

/// Apple's answer to a user migration call, as a caller acts on it.
/// Printed (`description`, what `siwa transfer status` shows), it holds
/// only status codes and Apple's error code.
public enum AppleMigrationOutcome<Value: Sendable & Equatable>: Sendable, Equatable, CustomStringConvertible {
    case success(Value)
    /// `invalid_grant`: Apple will not answer for this user (the sub or
    /// transfer_sub is unknown, or past the 60 days): final.
    case invalidGrant
    /// Apple refused siwa's client secret, client id or access token
    /// (`invalid_client`, or a 401): siwa's configuration; retried.
    case invalidClient
    /// Any other 4xx (`invalid_request`, ...): final.
    case rejected(status: Int, error: String?)
    /// No usable answer now (a network error, a timeout, 429, 5xx): retried.
    case unavailable(retryAfter: Duration?, reason: String)

    /// Apple's sorted answer; a 200 whose body `decode` cannot read (nil)
    /// is no answer (`unavailable`, naming what was `expecting`).
    init(_ answer: AppleAnswer.Kind, expecting: String, decode: (Data) -> Value?) {
        switch answer {
        case .ok(let body):
            self = decode(body).map { .success($0) }
                ?? .unavailable(retryAfter: nil, reason: "status 200 with a body that is not \(expecting)")
        case .invalidGrant: self = .invalidGrant
        case .invalidClient: self = .invalidClient
        case .rejected(let status, let error): self = .rejected(status: status, error: error)
        case .unavailable(let retryAfter, let reason): self = .unavailable(retryAfter: retryAfter, reason: reason)
        }
    }

    /// Worth asking again later (after the job's backoff).
    public var isRetryable: Bool {
        switch self {
        case .invalidClient, .unavailable: true
        case .success, .invalidGrant, .rejected: false
        }
    }

    public var description: String {
        switch self {
        case .success: "success"
        case .invalidGrant: "invalid_grant"
        case .invalidClient: "invalid_client: Apple refused siwa's client credentials (team id, key id, key, client id) or its access token"
        case .rejected(let status, let error): AppleAnswer.describeRejection(status: status, error: error)
        case .unavailable(let retryAfter, let reason): AppleAnswer.describeUnavailable(retryAfter: retryAfter, reason: reason)
        }
    }
}
