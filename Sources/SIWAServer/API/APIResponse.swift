import AccountLifecycle
import AccountStore
import AppleSignIn
import Foundation
import Hummingbird

/// JSON answers of the `/v1` API: typed values (numbers, booleans, null,
/// nested objects), so JSONSerialization rather than JSONResponse's
/// strings-only writer. Errors keep siwa's one shape, `{"error", "detail"}`.
enum APIResponse {
    static func json(_ status: HTTPResponse.Status, _ fields: [String: any Sendable]) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return JSONResponse.answer(status, ByteBuffer(bytes: data))
    }

    static func error(_ status: HTTPResponse.Status, _ reason: String, _ detail: String) -> Response {
        JSONResponse.error(status, reason: reason, detail: detail)
    }

    /// The sign-in answer, written by hand (sorted keys, as `json`):
    /// the hot path of `/v1`, where JSONSerialization costs more than the
    /// rest of the answer.
    static func signedIn(_ user: SignedInUser) -> Response {
        func text(_ value: String?) -> String { value.map(JSONText.quoted) ?? "null" }
        func flag(_ value: Bool?) -> String { value.map { $0 ? "true" : "false" } ?? "null" }
        let json = #"{"apple_sub":\#(JSONText.quoted(user.appleSub)),"email":\#(text(user.email)),"#
            + #""is_new_user":\#(flag(user.isNewUser)),"is_private_email":\#(flag(user.isPrivateEmail)),"#
            + #""real_user_status":\#(user.realUserStatus.map(String.init) ?? "null"),"#
            + #""refresh_token_stored":\#(flag(user.refreshTokenStored)),"status":\#(JSONText.quoted(user.status)),"#
            + #""user_id":\#(user.userID)}"#
        return JSONResponse.answer(.ok, ByteBuffer(string: json))
    }

    /// The user as `GET /v1/users/{sub}` shows it.
    static func fields(of user: UserView) -> [String: any Sendable] {
        var fields: [String: any Sendable] = [
            "user_id": user.userID, "apple_sub": user.appleSub, "status": user.status,
            "email": user.email ?? NSNull(), "is_private_email": user.isPrivateEmail ?? NSNull(),
            "real_user_status": user.realUserStatus ?? NSNull(),
        ]
        fields["email_forwarding_enabled"] = user.emailForwardingEnabled
        fields["created_at"] = timestamp(user.createdAt)
        fields["last_sign_in_at"] = user.lastSignInAt.map(timestamp) ?? NSNull()
        fields["refresh_token"] = ["stored": user.refreshTokenStored,
                                   "last_validated_at": user.lastValidatedAt.map(timestamp) ?? NSNull()] as [String: any Sendable]
        if let job = user.purgeJobID {
            // `waiting`: a consent revocation's purge in its grace delay;
            // `run_at`: when it (or a pending purge's next attempt) runs.
            fields["purge"] = ["job_id": job, "state": user.purgeState ?? "unknown", "waiting": user.purgeWaiting,
                               "run_at": user.purgeRunAt.map(timestamp) ?? NSNull()] as [String: any Sendable]
        } else {
            fields["purge"] = NSNull()
        }
        return fields
    }

    static func timestamp(_ date: Date) -> String {
        // RFC 3339 in UTC with milliseconds: 2026-11-23T15:10:57.150Z.
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// Apple's `sub` is printable ASCII of modest length (e.g.
    /// `001234.0123456789abcdef0123456789abcdef.0123`); anything else is
    /// no user of ours, answered without a database round trip.
    static func isPlausibleSub(_ sub: String) -> Bool {
        !sub.isEmpty && sub.utf8.count <= 255 && sub.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}
