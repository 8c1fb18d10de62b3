import AccountLifecycle
import AccountStore
import Foundation
import Hummingbird
import Logging
import Metrics
import SIWAConfiguration
import Tracing

/// `POST /apple/notifications`: Apple's server-to-server notifications.
///
/// 200 only after the commit (new, duplicate, or a verified event of an
/// unknown type); 400 with a reason for what is verifiably bad; 413 over the
/// size cap; 503 when we cannot decide now, so Apple retries. Never 500.
struct NotificationRoutes: Sendable {
    let receiver: NotificationReceiver
    let maxBodyBytes: Int
    let metrics: any MetricsFactory
    let tarpit: FloodTarpit

    func register(on router: Router<BasicRequestContext>) {
        // One histogram per answer siwa gives, made once (not per request).
        let timers = Dictionary(uniqueKeysWithValues: [200, 400, 413, 503].map { code in
            (code, Timer(label: "siwa_notification_request_duration_seconds", dimensions: [("status", String(code))], factory: metrics))
        })
        router.post("/apple/notifications") { request, _ in
            let start = ContinuousClock.now
            // Every line logged about this notification carries its request
            // id (RequestIDMiddleware set RequestLogContext); the span is the
            // trace's root (a no-op unless OTEL_EXPORTER_OTLP_ENDPOINT
            // bootstrapped a tracer).
            let response = await withSpan("siwa.notification.receive", ofKind: .server) { span in
                RequestLogContext.tag(span)
                let response = await handle(request)
                span.attributes["http.response.status_code"] = Int(response.status.code)
                return response
            }
            timers[Int(response.status.code)]?.record(duration: ContinuousClock.now - start)
            // During a flood of junk, refusals are held (FloodTarpit); the
            // histogram above is siwa's own time, without the hold.
            if response.status == .badRequest || response.status == .contentTooLarge, receiver.isFlooded {
                await tarpit.hold()
            }
            return response
        }
    }

    func handle(_ request: Request) async -> Response {
        // Refuse an announced oversize body before reading it. (Int64: a
        // Content-Length can announce more than 2^31 bytes.)
        if let length = request.headers[.contentLength].flatMap(Int64.init), length > Int64(maxBodyBytes) {
            receiver.reject(.bodyTooLarge(limit: maxBodyBytes), body: Data(), announcedBytes: length)
            return tooLarge()
        }
        var body = Data()
        do {
            for try await chunk in request.body {
                guard body.count + chunk.readableBytes <= maxBodyBytes else {
                    receiver.reject(.bodyTooLarge(limit: maxBodyBytes), body: body)
                    return tooLarge()
                }
                body.append(contentsOf: chunk.readableBytesView)
            }
        } catch {
            receiver.reject(.unreadableBody, body: body)
            return Self.closingConnection(
                JSONResponse.error(.badRequest, reason: Rejection.unreadableBody.reason, detail: Rejection.unreadableBody.detail))
        }

        let token: String
        switch NotificationBody.payload(of: body) {
        case .success(let payload): token = payload
        case .failure(let rejection):
            receiver.reject(rejection, body: body)
            return JSONResponse.error(.badRequest, reason: rejection.reason, detail: rejection.detail)
        }

        return NotificationAnswer(await receiver.receive(token: token, body: body)).response
    }

    /// Answered before the body was read whole, so it closes the connection
    /// (see `closingConnection`).
    private func tooLarge() -> Response {
        Self.closingConnection(
            JSONResponse.error(.contentTooLarge, reason: "body_too_large", detail: "the body is larger than \(maxBodyBytes) bytes"))
    }

    /// An answer given before the request body was read whole: the rest of
    /// the body is not worth reading, and the connection cannot carry another
    /// request without it. `Connection: close` tells the client;
    /// `CloseAfterResponseHandler` closes the connection once it is written.
    static func closingConnection(_ response: Response) -> Response {
        var response = response
        response.headers[.connection] = "close"
        return response
    }
}
