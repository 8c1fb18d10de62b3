import AccountStore
import Foundation
import Hummingbird

/// JSON answers of the `/v1` API: typed values (numbers, booleans, null,
/// nested objects), so JSONSerialization rather than JSONResponse's
/// strings-only writer. Errors keep siwa's one shape, `{"error", "detail"}`.
enum APIResponse {
    static func json(_ status: HTTPResponse.Status, _ fields: [String: any Sendable]) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func error(_ status: HTTPResponse.Status, _ reason: String, _ detail: String) -> Response {
        JSONResponse.error(status, reason: reason, detail: detail)
    }

    /// The user as the sign-in answer (`detailed` false) and
    /// `GET /v1/users/{sub}` (true) show it.
    static func fields(of user: UserView, detailed: Bool) -> [String: any Sendable] {
        var fields: [String: any Sendable] = [
            "user_id": user.userID, "apple_sub": user.appleSub, "status": user.status,
            "email": user.email ?? NSNull(), "is_private_email": user.isPrivateEmail ?? NSNull(),
            "real_user_status": user.realUserStatus ?? NSNull(),
        ]
        guard detailed else { return fields }
        fields["email_forwarding_enabled"] = user.emailForwardingEnabled
        fields["created_at"] = timestamp(user.createdAt)
        fields["last_sign_in_at"] = user.lastSignInAt.map(timestamp) ?? NSNull()
        fields["refresh_token"] = ["stored": user.refreshTokenStored,
                                   "last_validated_at": user.lastValidatedAt.map(timestamp) ?? NSNull()] as [String: any Sendable]
        if let job = user.purgeJobID {
            fields["purge"] = ["job_id": job, "state": user.purgeState ?? "unknown"] as [String: any Sendable]
        } else {
            fields["purge"] = NSNull()
        }
        return fields
    }

    static func timestamp(_ date: Date) -> String {
        date.ISO8601Format(.iso8601(timeZone: .gmt, includingFractionalSeconds: true))
    }

    /// Apple's `sub` is printable ASCII of modest length (e.g.
    /// `001234.0123456789abcdef0123456789abcdef.0123`); anything else is
    /// no user of ours, answered without a database round trip.
    static func isPlausibleSub(_ sub: String) -> Bool {
        !sub.isEmpty && sub.utf8.count <= 255 && sub.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}
