import AccountLifecycle

/// Refusals of Apple's request body itself, found before any token is read
/// (NotificationBody, NotificationRoutes): the HTTP layer's, recorded by
/// the receiver like the token's.
extension Rejection {
    public static let emptyBody = Rejection(reason: "empty_body", detail: "the request body is empty")
    public static let malformedBody = Rejection(reason: "malformed_body", detail: "the body is not a JSON object")
    public static let missingPayload = Rejection(reason: "missing_payload", detail: "the body has no string field \"payload\"")
    public static let unreadableBody = Rejection(reason: "unreadable_body", detail: "the request body could not be read")

    public static func bodyTooLarge(limit: Int) -> Rejection {
        Rejection(reason: "body_too_large", detail: "the body is larger than \(limit) bytes")
    }
}
