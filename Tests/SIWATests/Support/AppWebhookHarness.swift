import AppleSimulator
import Foundation
import SIWAClient

/// The app's side of the app events webhook for the tests: a receiver on
/// loopback (AppEventReceiver), two Standard Webhooks secrets, the worker
/// settings that point siwa at it, and the check an app's backend makes:
/// SIWAClient's AppEventVerifier, written apart from siwa's signing code.
final class AppWebhookHarness: Sendable {
    let receiver: AppEventReceiver
    let server: RunningServer
    let secret: String
    let nextSecret: String

    /// Stopped when the test ends (`.testDatabases`' scope: atTestEnd).
    static func start() async throws -> AppWebhookHarness {
        let receiver = AppEventReceiver()
        let server = try await TestPorts.serve { try await receiver.start(port: $0) }
        try atTestEnd { await server.stop() }
        return AppWebhookHarness(receiver: receiver, server: server, secret: Self.newSecret(), nextSecret: Self.newSecret())
    }

    private init(receiver: AppEventReceiver, server: RunningServer, secret: String, nextSecret: String) {
        self.receiver = receiver
        self.server = server
        self.secret = secret
        self.nextSecret = nextSecret
    }

    var url: String { server.baseURL + AppEventReceiver.path }

    /// `siwa worker`'s settings for this receiver; `rotating`: both secrets.
    func settings(rotating: Bool = false) -> [String: String] {
        var settings = ["SIWA_APP_WEBHOOK_URL": url, "SIWA_APP_WEBHOOK_SECRET": secret]
        if rotating { settings["SIWA_APP_WEBHOOK_SECRET_NEXT"] = nextSecret }
        return settings
    }

    /// The deliveries about `sub` the app took (2xx), in arrival order.
    func accepted(sub: String) -> [AppEventReceiver.Delivery] {
        receiver.deliveries.filter { $0.sub == sub && (200..<300).contains($0.status) }
    }

    /// `whsec_` + base64 of 32 random bytes, made here (not by siwa).
    static func newSecret() -> String {
        "whsec_" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    }

    /// Standard Webhooks, receiving side, as an app's backend checks a
    /// delivery (SIWAClient): one of the header's `v1,` signatures made with
    /// `secret`, the timestamp within 5 minutes.
    static func verify(_ delivery: AppEventReceiver.Delivery, secret: String, now: Date = Date()) -> Bool {
        (try? event(delivery, secret: secret, now: now)) != nil
    }

    /// The delivery's event as SIWAClient decodes it, once verified.
    static func event(_ delivery: AppEventReceiver.Delivery, secret: String, now: Date = Date()) throws -> AppEvent {
        try AppEventVerifier(secret: secret).verify(id: delivery.webhookID, timestamp: delivery.timestamp,
                                                    signature: delivery.signature, body: delivery.body, now: now)
    }

    /// As above, with this harness's secret.
    func event(_ delivery: AppEventReceiver.Delivery) throws -> AppEvent {
        try Self.event(delivery, secret: secret)
    }
}
