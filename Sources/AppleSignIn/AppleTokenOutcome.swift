import Foundation

/// Apple's answer to a code exchange or a refresh, as a caller acts on it.
/// Printed (`description`), it shows only status codes and Apple's error
/// code, never a token, a code or a secret: it goes into logs.
public enum AppleTokenOutcome: Sendable, Equatable, CustomStringConvertible {
    case success(AppleTokenResponse)
    /// The code or refresh token is used, expired, revoked or unknown
    /// (400 `invalid_grant`): final.
    case invalidGrant
    /// Apple refused the client secret or client id (`invalid_client`, 400
    /// or 401): a configuration problem (key, team id, client id).
    case invalidClient
    /// Any other 4xx (`invalid_request`, `unsupported_grant_type`, ...).
    case rejected(status: Int, error: String?)
    /// No usable answer now: network error, timeout, 5xx, 429, an answer
    /// that could not be read. Worth retrying, after `retryAfter` if given.
    case unavailable(retryAfter: Duration?, reason: String)

    public var description: String {
        switch self {
        case .success(let response): "success (\(response))"
        case .invalidGrant: "invalid_grant"
        case .invalidClient: "invalid_client"
        case .rejected(let status, let error): AppleAnswer.describeRejection(status: status, error: error)
        case .unavailable(let retryAfter, let reason): AppleAnswer.describeUnavailable(retryAfter: retryAfter, reason: reason)
        }
    }
}

/// Apple's answer to a revocation. Apple answers 200 even for a token it
/// does not know, so `success` proves nothing about the token: callers
/// record what they sent. `invalidGrant` (the token was already dead) is
/// done as well.
public enum AppleRevokeOutcome: Sendable, Equatable, CustomStringConvertible {
    case success
    case invalidGrant
    case invalidClient
    case rejected(status: Int, error: String?)
    case unavailable(retryAfter: Duration?, reason: String)

    public var description: String {
        switch self {
        case .success: "success"
        case .invalidGrant: "invalid_grant"
        case .invalidClient: "invalid_client"
        case .rejected(let status, let error): AppleAnswer.describeRejection(status: status, error: error)
        case .unavailable(let retryAfter, let reason): AppleAnswer.describeUnavailable(retryAfter: retryAfter, reason: reason)
        }
    }
}

/// What `/auth/token` returns: `access_token`, `token_type`, `expires_in`,
/// and `refresh_token` (after a code exchange) and `id_token`. Printing,
/// debug-printing or dumping it shows the token type, the lifetime and the
/// tokens' lengths only.
public struct AppleTokenResponse: Sendable, Equatable, Decodable,
    CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let accessToken: String
    public let tokenType: String
    public let expiresIn: Int
    public let refreshToken: String?
    public let idToken: String?

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresIn = "expires_in"
        case refreshToken = "refresh_token"
        case idToken = "id_token"
    }

    public init(accessToken: String, tokenType: String, expiresIn: Int, refreshToken: String?, idToken: String?) {
        self.accessToken = accessToken
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.refreshToken = refreshToken
        self.idToken = idToken
    }

    public var description: String {
        func redacted(_ token: String?) -> String { token.map { "<\($0.utf8.count) bytes>" } ?? "none" }
        // token_type is Apple's constant ("Bearer"), kept only when it is a plain word.
        let type = tokenType.count <= 16 && tokenType.allSatisfy { $0.isLetter && $0.isASCII } ? tokenType : "<other>"
        return "AppleTokenResponse(token_type: \(type), expires_in: \(expiresIn), access_token: \(redacted(accessToken)), "
            + "refresh_token: \(redacted(refreshToken)), id_token: \(redacted(idToken)))"
    }

    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["redacted": description]) }
}

extension AppleTokenResponse {
    /// Apple's token answer, or nil when it is not one. Read in one pass
    /// when it is the flat object Apple sends (`PlainJSONObject`: strings
    /// and an integer), else by JSONDecoder, which then decides: a sign-in
    /// reads one of these, and a JSONDecoder pass costs more than the
    /// reading it does.
    public static func decoding(_ body: Data) -> AppleTokenResponse? {
        if let plain = body.withUnsafeBytes({ PlainJSONObject($0) }), let response = AppleTokenResponse(plain: plain) {
            return response
        }
        return try? JSONDecoder().decode(AppleTokenResponse.self, from: body)
    }

    /// The members exactly as the synthesized `init(from:)` reads them
    /// (other members ignored, the two optional ones absent or null); nil
    /// for anything else, which JSONDecoder then reads or refuses.
    init?(plain: PlainJSONObject) {
        guard case .string(let accessToken)? = plain["access_token"], case .string(let tokenType)? = plain["token_type"],
              case .integer(let expires)? = plain["expires_in"], let expiresIn = Int(exactly: expires),
              let refreshToken = plain.optionalString("refresh_token"), let idToken = plain.optionalString("id_token") else {
            return nil
        }
        self.init(accessToken: accessToken, tokenType: tokenType, expiresIn: expiresIn, refreshToken: refreshToken, idToken: idToken)
    }
}
