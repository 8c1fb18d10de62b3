import Crypto
import Foundation
import Synchronization

/// The example's own records, in memory: its users (keyed by Apple's `sub`
/// and team together: a sub is scoped to a developer team) and the sessions
/// it minted. A real backend keeps both in its database.
final class Accounts: Sendable {
    struct UserKey: Hashable, Sendable {
        let sub: String
        let team: String
    }

    struct User: Sendable {
        var userID: Int64
        var email: String?
        /// false after Apple's `email-disabled`: the relay no longer forwards.
        var emailDeliverable = true
    }

    struct Session: Sendable {
        let user: UserKey
        let userID: Int64
    }

    private struct State {
        var users: [UserKey: User] = [:]
        /// By the SHA-256 of the session token: a leaked copy of this map
        /// holds no usable token.
        var sessions: [String: Session] = [:]
    }

    private let state = Mutex(State())

    /// A new session for the user siwa signed in; returns its bearer token.
    func startSession(for key: UserKey, userID: Int64, email: String?) -> String {
        let token = Self.newToken()
        state.withLock { state in
            var user = state.users[key] ?? User(userID: userID, email: email)
            user.userID = userID
            if let email { user.email = email }
            state.users[key] = user
            state.sessions[Self.digest(token)] = Session(user: key, userID: userID)
        }
        return token
    }

    func session(token: String) -> Session? {
        state.withLock { $0.sessions[Self.digest(token)] }
    }

    func user(_ key: UserKey) -> User? {
        state.withLock { $0.users[key] }
    }

    /// Ends every session of the user (TN3194: "Revert the client to an
    /// unauthenticated state"); returns how many.
    @discardableResult
    func endSessions(of key: UserKey) -> Int {
        state.withLock { state in
            let ended = state.sessions.filter { $0.value.user == key }.map(\.key)
            for digest in ended { state.sessions[digest] = nil }
            return ended.count
        }
    }

    /// Ends the sessions and deletes what the backend holds for the user.
    func delete(_ key: UserKey) {
        state.withLock { state in
            state.users[key] = nil
            state.sessions = state.sessions.filter { $0.value.user != key }
        }
    }

    func updateUser(_ key: UserKey, _ change: (inout User) -> Void) {
        state.withLock { state in
            if var user = state.users[key] {
                change(&user)
                state.users[key] = user
            }
        }
    }

    /// An app transfer gave the user a new sub in the receiving team: the
    /// same person, keyed by the new sub from now on.
    func move(_ old: UserKey, to new: UserKey) {
        state.withLock { state in
            if let user = state.users.removeValue(forKey: old) { state.users[new] = user }
            for (digest, session) in state.sessions where session.user == old {
                state.sessions[digest] = Session(user: new, userID: session.userID)
            }
        }
    }

    private static func newToken() -> String {
        SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    private static func digest(_ token: String) -> String {
        SHA256.hash(data: Data(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
