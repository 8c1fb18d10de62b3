import Logging
import Tracing

/// The request a log line or a span is about: the listeners' request-id
/// middleware (SIWAServer's `RequestIDMiddleware`) sets it, a task-local,
/// while it handles one; swift-log's metadata provider, bootstrapped in
/// `LoggingSetup`, adds it as `request_id` to every line logged in that
/// task, whichever logger writes it, and `tag(_:)` puts it on siwa's spans.
public enum RequestLogContext {
    @TaskLocal public static var requestID: Logger.MetadataValue?

    public static let metadataProvider = Logger.MetadataProvider {
        guard let id = requestID else { return [:] }
        return ["request_id": id]
    }

    /// The span's `siwa.request_id` attribute: the request it is part of (none outside one).
    public static func tag(_ span: any Span) {
        if span.isRecording, let id = requestID { span.attributes["siwa.request_id"] = id.description }
    }
}
