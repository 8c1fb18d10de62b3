import Hummingbird

/// Answers of the `/v1` API (`UserAnswers`, `SignInAnswer`); errors keep
/// siwa's one shape, `{"error", "detail"}`.
enum APIResponse {
    static func error(_ status: HTTPResponse.Status, _ reason: String, _ detail: String) -> Response {
        JSONResponse.error(status, reason: reason, detail: detail)
    }

    /// Apple's `sub` is printable ASCII of modest length (e.g.
    /// `001234.0123456789abcdef0123456789abcdef.0123`); anything else is
    /// no user of ours, answered without a database round trip.
    static func isPlausibleSub(_ sub: String) -> Bool {
        !sub.isEmpty && sub.utf8.count <= 255 && sub.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}
