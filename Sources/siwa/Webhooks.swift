import AccountLifecycle
import AccountStore
import ArgumentParser
import AsyncHTTPClient
import Foundation
import SIWAConfiguration
import SIWAWorker

struct Webhooks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The app events webhook: send a test event, replay past events, make a secret.",
        discussion: """
            siwa worker delivers every event siwa records (Apple's notifications, sign-ins, \
            deletions, purges) to SIWA_APP_WEBHOOK_URL, signed the Standard Webhooks way \
            (docs/app-events.md).
            test reads the worker's settings (run it with worker.env); replay needs \
            SIWA_DATABASE_URL, your own database role (a member of siwa_admin), as `siwa jobs` \
            does, and writes an audit row naming it.

            \(SettingsDocs.help(for: .webhooks))
            """,
        subcommands: [Test.self, Replay.self, Secret.self]
    )

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a signed test event (type siwa.test) to SIWA_APP_WEBHOOK_URL and print the answer.",
            discussion: """
                The body is {"type":"siwa.test","timestamp":...,"data":{...}}, the webhook-id \
                test_<uuid>, signed with SIWA_APP_WEBHOOK_SECRET (and SIWA_APP_WEBHOOK_SECRET_NEXT \
                when set). Exit status 0 when the app answered 2xx, 1 otherwise, 2 for a bad setting.
                """)

        func run() async throws {
            let env = Startup.reader()
            Startup.warnUnknownSettings(env)
            let settings = Startup.settings { try AppWebhookTarget.read(env) }
            guard let settings else {
                Startup.fail("SIWA_APP_WEBHOOK_URL: is required (e.g. SIWA_APP_WEBHOOK_URL=\(SettingsCatalog.appWebhookURL.example ?? "..."))")
            }
            let id = "test_" + UUID().uuidString.lowercased()
            let now = Date()
            let body = AppEventDelivery.envelope(
                type: "siwa.test", timestamp: UTCTime.text(now, .seconds),
                data: #"{"message":"a test event from siwa webhooks test: no user is concerned; answer 2xx"}"#)
            print("POST \(settings.redactedURL)")
            print("webhook-id: \(id) (\(settings.keys.count) signature\(settings.keys.count == 1 ? "" : "s"))")
            print(String(decoding: body, as: UTF8.self))
            let http = WorkerAssembly.webhookClient()
            let start = ContinuousClock.now
            let outcome: Result<WebhookDelivery.Answer, any Error>
            do {
                outcome = .success(try await WebhookDelivery(http: http).post(
                    to: settings.url, keys: settings.keys, timeoutSeconds: settings.timeoutSeconds, id: id, body: body, now: now,
                    bodyLimit: 2048))
            } catch {
                outcome = .failure(error)
            }
            let took = ContinuousClock.now - start
            try? await http.shutdown()
            switch outcome {
            case .success(let answer):
                print("answered HTTP \(answer.status) in \(Self.milliseconds(took)) ms")
                if !answer.body.isEmpty { print(String(decoding: answer.body, as: UTF8.self)) }
                if !(200..<300).contains(answer.status) { Startup.fail("the app did not take the test event (HTTP \(answer.status); only a 2xx counts)", code: 1) }
            case .failure(let error):
                Startup.fail("\(error)", code: 1)
            }
        }

        static func milliseconds(_ duration: Duration) -> String {
            String(format: "%.1f", duration / .milliseconds(1))
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Enqueue again the deliveries of the events recorded since a time (an app that was down longer than the attempts).",
            discussion: """
                Each event keeps its webhook-id, so the app can skip what it has seen; an event \
                whose delivery is still pending is not enqueued twice. The events come from the \
                audit trail, which is never pruned, so a replay reaches back before the queue's \
                retention. Refused while the webhook is off (no worker has SIWA_APP_WEBHOOK_URL).
                """)

        @Option(help: ArgumentHelp("Events recorded from this time on: \(AuditTime.accepted).", valueName: "time"))
        var since: String

        @Option(help: "Only this Apple user's events.")
        var sub: String?

        @Option(help: "At most this many events in one run (the command says where to go on from).")
        var limit = 100_000

        func validate() throws {
            guard AuditTime.parse(since) != nil else { throw ValidationError("--since: expected \(AuditTime.accepted), got '\(since)'") }
            guard (1...1_000_000).contains(limit) else { throw ValidationError("--limit must be in 1...1000000") }
            if let sub, sub.isEmpty || sub.count > 255 { throw ValidationError("--sub: expected an Apple sub (1 to 255 characters)") }
        }

        func run() async throws {
            guard let time = AuditTime.parse(since) else { throw ValidationError("--since: expected \(AuditTime.accepted)") }
            let (sub, limit, hint) = (self.sub, self.limit, JobsConnection.loginHint)
            let outcome = await CommandDatabase.run(label: "siwa.webhooks", refusing: AppEventReplayRefused.self) { client, logger in
                try await AppEventReplay(client: client, logger: logger).replay(since: time, sub: sub, limit: limit, loginHint: hint)
            }
            print("enqueued \(outcome.enqueued) deliveries; \(outcome.alreadyPending) were pending already")
            if let next = outcome.continueFrom {
                print("more events than --limit \(limit): run again with --since \(next)")
            }
        }
    }

    struct Secret: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a new signing secret (whsec_ + base64 of 32 random bytes) for SIWA_APP_WEBHOOK_SECRET.",
            discussion: "Send it straight into worker.env and to the app's secret store: never paste it into a ticket or a chat.")

        func run() async throws {
            print(StandardWebhook.newSecret())
        }
    }
}
