import Foundation
import Logging
import PostgresNIO
import Synchronization

/// What a key opens (`siwa.api_keys.scope`): each scope is refused on the
/// other's routes.
public enum APIKeyScope: String, Sendable, Codable, CaseIterable {
    /// The app's backend: `/v1` (sign-in, users, deletion). The default.
    case app
    /// An admin: the admin listener's `/admin` routes and page.
    case admin
}

/// The API key a request was authenticated with.
public struct APIKeyIdentity: Sendable, Equatable, Hashable {
    public let id: Int64
    public let name: String
    public let scope: APIKeyScope

    public init(id: Int64, name: String, scope: APIKeyScope = .app) {
        self.id = id
        self.name = name
        self.scope = scope
    }
}

/// Checks the keys of `/v1` and `/admin` requests, in `siwa serve` as the
/// runtime role. The caller checks the scope.
///
/// Without a cache every request looks its key up. With one (`/v1`: see
/// `APIKeyCache`) a key verified lately is checked against the cached
/// hash, and a revoke reaches every instance by NOTIFY within milliseconds
/// of its commit. Either way the secret is compared in constant time on
/// every request. `last_used_at` is written at most once a minute per key
/// per process, after the answer and never waited for, so many concurrent
/// requests with one key do not queue on that row's lock.
public struct APIKeyVerifier: Sendable {
    let client: PostgresClient
    let logger: Logger
    let usage: UsageNotes
    let cache: APIKeyCache?

    public init(client: PostgresClient, cache: APIKeyCache? = nil, logger: Logger) {
        self.client = client
        self.logger = logger
        self.cache = cache
        self.usage = UsageNotes()
    }

    /// The key's identity, or nil when `bearer` is malformed (no database
    /// call then), unknown, revoked, or has the wrong secret. Throws when
    /// the database cannot say (the caller answers 503, not 401).
    public func authenticate(bearer: String) async throws -> APIKeyIdentity? {
        guard let key = APIKeyFormat(parsing: bearer) else { return nil }
        if let cached = cache?.entry(prefix: key.prefix) {
            guard key.matches(storedSHA256: cached.secretSHA256) else { return nil }
            noteUseIfDue(cached.identity.id)
            return cached.identity
        }
        let generation = cache?.generation()
        let rows = try await client.guardedExecute(LiveKey(prefix: key.prefix), leaseWithin: .requestLease, logger: logger)
        guard let (id, name, scope, stored) = rows.first else { return nil }
        guard key.matches(storedSHA256: stored), let scope = APIKeyScope(rawValue: scope) else { return nil }
        let identity = APIKeyIdentity(id: id, name: name, scope: scope)
        if let generation { cache?.store(identity, prefix: key.prefix, secretSHA256: stored, readAt: generation) }
        noteUseIfDue(id)
        return identity
    }

    private func noteUseIfDue(_ id: Int64) {
        if usage.shouldNote(id) { noteUse(id) }
    }

    /// The live key with a prefix (prepared: every request asks it).
    struct LiveKey: PostgresPreparedStatement {
        static let sql = "SELECT id, name, scope, secret_sha256 FROM siwa.api_keys WHERE prefix = $1 AND revoked_at IS NULL"
        typealias Row = (Int64, String, String, Data)
        let prefix: String

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(prefix)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    /// Off the request path. The WHERE keeps instances from rewriting a
    /// timestamp another one wrote within the minute.
    private func noteUse(_ id: Int64) {
        let client = client, logger = logger, usage = usage
        Task {
            do {
                try await client.guardedQuery("""
                    UPDATE siwa.api_keys SET last_used_at = now()
                    WHERE id = \(id) AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
                    """, logger: logger)
            } catch {
                usage.forget(id)  // try again with the next request
                logger.warning("could not note an API key's use", metadata: ["api_key_id": "\(id)", "error": "\(safeDescription(error))"])
            }
        }
    }

    /// When this process last wrote each key's `last_used_at`.
    final class UsageNotes: Sendable {
        private let written = Mutex<[Int64: ContinuousClock.Instant]>([:])
        static let interval = Duration.seconds(60)

        /// True for the first request of a key in each minute (and claims it,
        /// so concurrent requests get false).
        func shouldNote(_ id: Int64) -> Bool {
            let now = ContinuousClock.now
            return written.withLock { written in
                if let last = written[id], now - last < Self.interval { return false }
                written[id] = now
                return true
            }
        }

        func forget(_ id: Int64) {
            _ = written.withLock { $0.removeValue(forKey: id) }
        }
    }
}
