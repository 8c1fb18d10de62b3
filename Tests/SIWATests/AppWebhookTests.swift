import AppleSimulator
import Foundation
import Hummingbird
import Logging
import SIWAClient
import SIWAConfiguration
import SIWAWorker
import Testing

/// The app events webhook end to end: `siwa serve` in-process records,
/// real `siwa worker` processes deliver over loopback HTTP to a receiver
/// started here, and the tests check each delivery's Standard Webhooks
/// signature and read its event as an app's backend does, with SIWAClient
/// (AppWebhookHarness.verify, .event); the envelope's own bytes are checked raw.
@Suite("App events webhook", .testDatabases, .timeLimit(.minutes(10)))
struct AppWebhookTests {
    /// serve (in-process) on a fresh database, and the app's receiver.
    struct Setup: Sendable {
        let server: ServerHarness
        let hook: AppWebhookHarness
        var database: TestDatabase { server.database }
        var receiver: AppEventReceiver { hook.receiver }

        /// Both are stopped when the test ends (the receiver by its harness).
        static func start() async throws -> Setup {
            let server = try await ServerHarness.start()
            try atTestEnd { await server.stop() }
            return Setup(server: server, hook: try await AppWebhookHarness.start())
        }

        /// A `siwa worker` delivering to the receiver, once it has turned the webhook on.
        func startWorker(rotating: Bool = false, _ extra: [String: String] = [:]) async throws -> SIWAProcess {
            let settings = ["SIWA_DATABASE_URL": database.workerURL, "SIWA_JOB_LEASE_SECONDS": "2", "SIWA_JOB_RETRY_BASE_SECONDS": "0.05",
                            "SIWA_WORKER_POLL_SECONDS": "0.5", "SIWA_LOG_LEVEL": "info"]
                .merging(hook.settings(rotating: rotating)) { $1 }.merging(extra) { $1 }
            let worker = try SIWAProcess(environment: settings, arguments: ["worker"])
            try await worker.waitForLog("Worker started")
            return worker
        }

        func post(_ type: String, sub: String, email: String? = nil, eventTime: Date = Date()) async throws {
            let answer = try await server.post(token: try server.notification(type, sub: sub, eventTime: eventTime, email: email))
            guard answer.status == 200 else { throw TestSetupError("\(type) for \(sub) answered \(answer.status): \(answer.text)") }
        }

        func appEventJobs(state: String? = nil) async throws -> Int {
            try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE kind = 'app_event'"
                                      + (state.map { " AND state = '\($0)'" } ?? ""))
        }
    }

    /// With a tracer (OTEL_EXPORTER_OTLP_ENDPOINT), each delivery carries
    /// the job step's W3C `traceparent`, so the app can join its spans to
    /// siwa's trace; without one, none.
    @Test func aTracedWorkerSendsTraceparent() async throws {
        let setup = try await Setup.start()
        let collector = try await TestPorts.serve { port in
            let router = Router(context: BasicRequestContext.self)
            router.post("/v1/traces") { _, _ in Response(status: .ok, headers: [.contentType: "application/x-protobuf"]) }
            return try await RunningServer.start(router: router, port: port, logger: Logger(label: "otlp-receiver"))
        }
        try atTestEnd { await collector.stop() }
        let traced = try await setup.startWorker(["OTEL_EXPORTER_OTLP_ENDPOINT": collector.baseURL])
        try atTestEnd { await traced.kill9() }
        try await setup.post("email-disabled", sub: "001.traced.1")
        #expect(try await eventually(upTo: .seconds(30)) { !setup.hook.accepted(sub: "001.traced.1").isEmpty }, "\(traced.log.suffix(3000))")
        let parent = try #require(setup.hook.accepted(sub: "001.traced.1").first?.traceparent, "no traceparent: \(traced.log.suffix(2000))")
        #expect(parent.wholeMatch(of: /00-[0-9a-f]{32}-[0-9a-f]{16}-0[0-3]/) != nil, "\(parent)")
        #expect(await traced.terminate() == 0)

        let plain = try await setup.startWorker()
        try atTestEnd { await plain.kill9() }
        try await setup.post("email-disabled", sub: "001.traced.2")
        #expect(try await eventually(upTo: .seconds(30)) { !setup.hook.accepted(sub: "001.traced.2").isEmpty }, "\(plain.log.suffix(3000))")
        #expect(setup.hook.accepted(sub: "001.traced.2").first?.traceparent == nil)
    }

    /// Every type Apple sends, and one it may send some day, reaches the
    /// app once, in the envelope, signed with both secrets during a
    /// rotation; a consent revocation is also `consent.revoked`, a deletion
    /// also `purge.completed` once the worker has purged; no email address.
    @Test func everyNotificationIsDeliveredSignedWithBothSecrets() async throws {
        let setup = try await Setup.start()
        let worker = try await setup.startWorker(rotating: true)
        try atTestEnd { await worker.kill9() }
        let types = ["email-disabled", "email-enabled", "consent-revoked", "account-delete", "account-deleted", "some-future-type"]
        for (index, type) in types.enumerated() {
            try await setup.post(type, sub: "001.hook.\(index)", email: type.hasPrefix("email") ? "hook\(index)@privaterelay.appleid.com" : nil)
        }
        // Apple's redelivery of a notification is no new event.
        let token = try setup.server.notification("email-enabled", sub: "001.hook.9", jti: "hook-jti-9")
        for _ in 0..<2 { #expect(try await setup.server.post(token: token).status == 200) }

        var expected = Set(types.enumerated().map { "001.hook.\($0.offset) apple.\($0.element)" })
        expected.formUnion(["001.hook.2 consent.revoked", "001.hook.3 purge.completed", "001.hook.4 purge.completed",
                            "001.hook.9 apple.email-enabled"])
        #expect(try await eventually(upTo: .seconds(30)) {
            Set(setup.receiver.deliveries.map { "\($0.sub) \($0.type)" }) == expected
        }, "\(setup.receiver.deliveries.map { "\($0.sub) \($0.type)" }) \(worker.log.suffix(3000))")
        // Nothing more arrives: no delivery is left to make (each job sends
        // its event before it completes).
        #expect(try await eventually(upTo: .seconds(30)) {
            try await setup.appEventJobs() == (try await setup.appEventJobs(state: "completed"))
        }, "\(worker.log.suffix(3000))")
        let deliveries = setup.receiver.deliveries
        #expect(deliveries.count == expected.count, "each event once: \(deliveries.map(\.webhookID))")
        #expect(Set(deliveries.map(\.webhookID)).count == deliveries.count)
        for delivery in deliveries {
            let what = "\(delivery.type) \(delivery.webhookID)"
            #expect(delivery.signature.split(separator: " ").count == 2, "\(what): two signatures during a rotation")
            #expect(AppWebhookHarness.verify(delivery, secret: setup.hook.secret), "\(what): the current secret's signature")
            #expect(AppWebhookHarness.verify(delivery, secret: setup.hook.nextSecret), "\(what): the next secret's signature")
            #expect(!AppWebhookHarness.verify(delivery, secret: AppWebhookHarness.newSecret()), "\(what): a stranger's secret fails")
            #expect(delivery.webhookID.wholeMatch(of: /evt_[0-9]+_[12]/) != nil, "\(what)")
            #expect(Set(delivery.envelope.keys) == ["type", "timestamp", "data"], "\(what): \(delivery.envelope.keys)")
            #expect((delivery.envelope["timestamp"] as? String)?.wholeMatch(of: /[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z/) != nil, "\(what)")
            #expect(!String(decoding: delivery.body, as: UTF8.self).contains("@"), "\(what): no email address")
            // Every event names the user's team and the client it concerns.
            let event = try setup.hook.event(delivery)
            #expect(event.id == delivery.webhookID && event.type == delivery.type && event.data.sub == delivery.sub)
            #expect(event.data.team == TestEnvironment.team && event.data.clientID == ServerHarness.clientID, "\(what): \(event.data)")
        }
        let disabled = try setup.hook.event(try #require(deliveries.first { $0.type == "apple.email-disabled" }))
        #expect(disabled.kind == .appleEmailDisabled && disabled.data.appleType == "email-disabled" && disabled.data.isPrivateEmail == true)
        #expect(disabled.data.email == nil && disabled.data.jti != nil && disabled.data.eventTime != nil && disabled.date != nil)
        let revoked = try setup.hook.event(try #require(deliveries.first { $0.type == "consent.revoked" }))
        // The default policy: the purge waits out the grace delay, and the app hears when it runs.
        #expect(revoked.kind == .consentRevoked && revoked.data.source == "apple" && revoked.data.purge == true
                && revoked.data.purgeAfter != nil, "\(revoked.data)")
        let delete = try setup.hook.event(try #require(deliveries.first { $0.type == "apple.account-delete" }))
        #expect(delete.kind == .appleAccountDeleted && delete.data.purge == true)
        #expect(try setup.hook.event(try #require(deliveries.first { $0.type == "apple.some-future-type" })).kind == .appleOther("some-future-type"))
        let purged = try setup.hook.event(try #require(deliveries.first { $0.sub == "001.hook.3" && $0.type == "purge.completed" }))
        #expect(purged.kind == .purgeCompleted && purged.data.scope == "all" && purged.data.jobID != nil)
        #expect(setup.hook.accepted(sub: "001.hook.3").map(\.type) == ["apple.account-delete", "purge.completed"])
        #expect(try await setup.appEventJobs(state: "completed") == expected.count)
    }

    /// A delivery job forged with serve's credentials (its role may insert
    /// `app_event` jobs, for the inbox) is refused by the worker unless its
    /// audit row maps to it: another type, another position or another
    /// user's sub is discarded, never sent (sql/019).
    @Test func aForgedDeliveryIsRefusedNotSent() async throws {
        let setup = try await Setup.start()
        let worker = try await setup.startWorker()
        try atTestEnd { await worker.kill9() }
        let sub = "001.forge.1"
        try await setup.post("email-enabled", sub: sub)
        #expect(try await eventually(upTo: .seconds(30)) { setup.hook.accepted(sub: sub).count == 1 }, "\(worker.log.suffix(2000))")
        let seq = try await setup.database.scalar("SELECT seq FROM siwa.audit_log WHERE action = 'notification.recorded' AND apple_sub = '\(sub)'")
        // The last two name the row's event exactly, but another team, or none.
        let forged: [(String, String, String, String?)] = [
            (sub, "purge.completed", "evt_\(seq)_1", TestEnvironment.team),
            (sub, "consent.revoked", "evt_\(seq)_2", TestEnvironment.team),
            (sub, "apple.email-enabled", "evt_\(seq)_7", TestEnvironment.team),
            ("001.forge.other", "apple.email-enabled", "evt_\(seq)_1", TestEnvironment.team),
            (sub, "apple.email-enabled", "evt_\(seq)_1", "OTHER12345"),
            (sub, "apple.email-enabled", "evt_\(seq)_1", nil),
        ]
        try await TestDatabase.withClient(try setup.database.serveConfiguration) { client in
            for (target, type, id, team) in forged {
                try await client.query("""
                    INSERT INTO siwa.jobs (kind, args) VALUES ('app_event', jsonb_strip_nulls(jsonb_build_object(
                        'apple_sub', \(target)::text, 'apple_team', \(team)::text, 'event_type', \(type)::text, 'audit_seq', \(seq)::bigint,
                        'event_id', \(id)::text)))
                    """, logger: TestEnvironment.logger)
            }
        }
        #expect(try await eventually(upTo: .seconds(30)) { try await setup.appEventJobs(state: "discarded") == forged.count },
                "\(worker.log.suffix(3000))")
        #expect(setup.receiver.deliveries.map { "\($0.sub) \($0.type)" } == ["\(sub) apple.email-enabled"])
        #expect(worker.log.contains("refused, not sent"), "\(worker.log.suffix(2000))")
    }

    /// SIWA_APP_WEBHOOK_INCLUDE_EMAIL=true: Apple's email events carry the address.
    @Test func theEmailAddressGoesOnlyWhenTheSettingSaysSo() async throws {
        let setup = try await Setup.start()
        let worker = try await setup.startWorker(["SIWA_APP_WEBHOOK_INCLUDE_EMAIL": "true"])
        try atTestEnd { await worker.kill9() }
        try await setup.post("email-enabled", sub: "001.mail.1", email: "mail1@privaterelay.appleid.com")
        #expect(try await eventually(upTo: .seconds(30)) { !setup.hook.accepted(sub: "001.mail.1").isEmpty }, "\(worker.log.suffix(2000))")
        let delivery = try #require(setup.hook.accepted(sub: "001.mail.1").first)
        #expect(try setup.hook.event(delivery).data.email == "mail1@privaterelay.appleid.com")
        #expect(delivery.signature.split(separator: " ").count == 1, "one secret, one signature")
    }

    /// An idle worker hears of a new delivery at once (NOTIFY), not at its
    /// next poll: from the inbox statement and from the audit trigger.
    @Test func anIdleWorkerIsWokenForADelivery() async throws {
        let setup = try await Setup.start()
        let worker = try await setup.startWorker(["SIWA_WORKER_POLL_SECONDS": "60"])
        try atTestEnd { await worker.kill9() }
        // Its LISTEN in place (its first claims, which LISTEN starting
        // triggers, find nothing): only a NOTIFY can wake it within 5 s.
        #expect(try await eventually(upTo: .seconds(30)) { try await setup.database.jobListeners() == 1 }, "\(worker.log.suffix(2000))")
        try await setup.post("email-enabled", sub: "001.wake.1")
        #expect(try await eventually(upTo: .seconds(5)) { setup.hook.accepted(sub: "001.wake.1").count == 1 }, "\(worker.log.suffix(2000))")
        // Any writer of a lifecycle row (here psql) enqueues through the
        // trigger; once the first delivery's job is done, the worker has
        // nothing left to claim.
        #expect(try await eventually(upTo: .seconds(30)) {
            let all = try await setup.appEventJobs(), completed = try await setup.appEventJobs(state: "completed")
            return all > 0 && all == completed
        })
        // The row as a sign-in writes it (every field the event's schema
        // requires: make test checks each delivery against docs/openapi.yaml).
        try await setup.database.execute("""
            INSERT INTO siwa.audit_log (actor, action, apple_sub, apple_team, details)
            VALUES ('api', 'user.signed_in', '001.wake.2', 'TEAM123456', '{"user_id": 7, "is_new_user": true, "refresh_token_stored": false}')
            """)
        #expect(try await eventually(upTo: .seconds(5)) { setup.hook.accepted(sub: "001.wake.2").count == 1 }, "\(worker.log.suffix(2000))")
        #expect(setup.hook.accepted(sub: "001.wake.2").first?.type == "user.signed_in")
    }

    /// The app answers 500 once: the retry carries the same webhook-id and
    /// body, and the user's next event, enqueued meanwhile, waits for it.
    @Test func aRetryKeepsItsIDAndTheUsersNextEventWaits() async throws {
        let setup = try await Setup.start()
        setup.receiver.answer { _, body, attempt in
            String(decoding: body, as: UTF8.self).contains("apple.email-disabled") && attempt == 1 ? 500 : 204
        }
        // A backoff of 5 s (4 to 6 with jitter): another user's event, sent
        // with this user's two, is delivered well within it, even on a loaded
        // machine; this user's second waits for the retry (the claim's order rule).
        let port = try freePort()
        let worker = try await setup.startWorker(["SIWA_JOB_RETRY_BASE_SECONDS": "5", "SIWA_WORKER_METRICS_PORT": String(port)])
        try atTestEnd { await worker.kill9() }
        let sub = "001.order.1"
        try await setup.post("email-disabled", sub: sub, eventTime: Date().addingTimeInterval(-5))
        try await setup.post("email-enabled", sub: sub)
        // Another user's event, at once: it must not wait for this user's retry.
        try await setup.post("email-enabled", sub: "001.order.other")
        #expect(try await eventually(upTo: .seconds(30)) {
            setup.hook.accepted(sub: sub).count == 2 && setup.hook.accepted(sub: "001.order.other").count == 1
        }, "\(worker.log.suffix(3000))")
        let forUser = setup.receiver.deliveries.filter { $0.sub == sub }
        #expect(forUser.map(\.type) == ["apple.email-disabled", "apple.email-disabled", "apple.email-enabled"],
                "the second event waited for the first: \(forUser.map { "\($0.type) \($0.status)" })")
        #expect(forUser.map(\.status) == [500, 204, 204])
        #expect(forUser[0].webhookID == forUser[1].webhookID && forUser[0].body == forUser[1].body)
        #expect(forUser[1].webhookID != forUser[2].webhookID)
        // Another user's event did not wait for this one's retry.
        let other = try #require(setup.receiver.deliveries.firstIndex { $0.sub == "001.order.other" })
        let retry = try #require(setup.receiver.deliveries.lastIndex { $0.sub == sub && $0.type == "apple.email-disabled" })
        #expect(other < retry, "the retry held up only its own user")
        // A job kind of the worker's registry like the purge: claimed by its
        // own statement, its failure retried by the worker's retry policy,
        // each counted by kind.
        let kind = ["kind": "app_event"]
        let base = "http://127.0.0.1:\(port)"
        #expect(try await eventually(upTo: .seconds(5)) {
            try await PrometheusText.scrape(base).value("siwa_worker_jobs_completed_total", kind) == 3
        })
        let metrics = try await PrometheusText.scrape(base)
        #expect(metrics.value("siwa_worker_jobs_claimed_total", kind) == 4, "\(metrics.text)")
        #expect(metrics.value("siwa_worker_jobs_retried_total", kind) == 1)
        #expect(metrics.value("siwa_worker_jobs_discarded_total", kind) == 0)
        #expect(metrics.value("siwa_worker_webhook_failures_total", ["step": "app_event.deliver", "status_class": "5xx"]) == 1)
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'job.retry_scheduled' AND apple_sub = '\(sub)'
              AND details->>'step' = 'app_event.deliver'
            """) == 1)
    }

    /// The app keeps refusing one event: it is discarded after the attempts,
    /// `siwa jobs list` shows it with the app's answer, and the user's next
    /// event goes out then.
    @Test func aDeliveryIsDiscardedAfterItsAttemptsAndListed() async throws {
        let setup = try await Setup.start()
        setup.receiver.answer { _, body, _ in String(decoding: body, as: UTF8.self).contains("apple.email-disabled") ? 500 : 204 }
        let worker = try await setup.startWorker(["SIWA_JOB_MAX_ATTEMPTS": "2"])
        try atTestEnd { await worker.kill9() }
        let sub = "001.discard.1"
        try await setup.post("email-disabled", sub: sub, eventTime: Date().addingTimeInterval(-5))
        try await setup.post("email-enabled", sub: sub)
        #expect(try await eventually(upTo: .seconds(30)) { setup.hook.accepted(sub: sub).count == 1 }, "\(worker.log.suffix(3000))")
        let forUser = setup.receiver.deliveries.filter { $0.sub == sub }
        #expect(forUser.map(\.type) == ["apple.email-disabled", "apple.email-disabled", "apple.email-enabled"])
        #expect(try await setup.appEventJobs(state: "discarded") == 1)
        let listed = try await runSIWA(["jobs", "list", "--state", "discarded"], environment: ["SIWA_DATABASE_URL": setup.database.ownerURL])
        #expect(listed.status == 0, "\(listed.output)")
        #expect(listed.output.contains(sub) && listed.output.contains(" app_event ") && listed.output.contains("apple.email-disabled")
                && listed.output.contains("answered HTTP 500"), "\(listed.output)")
        // One kind at a time: no discarded purge here, the delivery under its own kind.
        let owner = ["SIWA_DATABASE_URL": setup.database.ownerURL]
        let purges = try await runSIWA(["jobs", "list", "--state", "discarded", "--kind", "purge_user"], environment: owner)
        #expect(purges.status == 0 && purges.output.contains("no discarded purge_user jobs"), "\(purges.output)")
        let deliveries = try await runSIWA(["jobs", "list", "--state", "discarded", "--kind", "app_event"], environment: owner)
        #expect(deliveries.status == 0 && deliveries.output.contains(sub), "\(deliveries.output)")
        let bad = try await runSIWA(["jobs", "list", "--kind", "app_event;"], environment: owner)
        #expect(bad.status == 64, "\(bad.status) \(bad.output)")  // EX_USAGE, as for any bad argument
        #expect(bad.output.contains("--kind must be a job kind's name"), "\(bad.output)")
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'job.discarded' AND apple_sub = '\(sub)'
            """) == 1)
    }

    /// siwa's own events: a sign-in, an in-app deletion and its purge; a
    /// refresh token Apple answers invalid_grant for.
    @Test func siwasOwnLifecycleEventsAreDelivered() async throws {
        let hook = try await AppWebhookHarness.start()
        let setup = try await AccountDeletionTests.Setup.start(worker: hook.settings())
        try atTestEnd { await setup.stop() }
        // As a worker with SIWA_APP_WEBHOOK_URL started earlier leaves it.
        try await setup.database.execute("UPDATE siwa.app_webhook SET enabled = true")
        let (deleted, kept) = ("001.life.del", "001.life.gone")
        _ = try await setup.signedIn(deleted)
        let token = try await setup.signedIn(kept).refreshToken
        setup.apple.revokeRefreshToken(token)
        try await setup.database.execute("""
            UPDATE siwa.apple_tokens SET validate_after = now() - interval '1 second'
            WHERE user_id = (SELECT id FROM siwa.users WHERE apple_sub = '\(kept)')
            """)
        #expect(try await setup.delete(deleted).status == 202)

        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        #expect(try await eventually(upTo: .seconds(40)) {
            hook.accepted(sub: deleted).count == 3 && hook.accepted(sub: kept).count == 2
        }, "\(hook.receiver.deliveries.map { "\($0.sub) \($0.type)" }) \(worker.log.suffix(3000))")
        #expect(hook.accepted(sub: deleted).map(\.type) == ["user.signed_in", "user.deletion_requested", "purge.completed"])
        // invalid_grant ends the session: no consent revocation, no purge.
        #expect(hook.accepted(sub: kept).map(\.type) == ["user.signed_in", "token.invalid_grant"])
        for delivery in hook.receiver.deliveries {
            #expect(AppWebhookHarness.verify(delivery, secret: hook.secret), "\(delivery.type)")
        }
        let events = try hook.accepted(sub: deleted).map(hook.event)
        #expect(events.map(\.kind) == [.userSignedIn, .userDeletionRequested, .purgeCompleted])
        #expect(events[0].data.isNewUser == true && events[0].data.userID != nil && events[0].data.clientID == SignInTests.client)
        #expect(events[1].data.purgeJobID != nil && events[1].data.userID == events[0].data.userID)
        #expect(events[2].data.scope == "all" && events[2].data.jobID == events[1].data.purgeJobID)
        let invalidGrant = try hook.event(hook.accepted(sub: kept)[1])
        #expect(invalidGrant.kind == .tokenInvalidGrant && invalidGrant.data.sessionEnded == true && invalidGrant.data.purge == false)
    }

    /// A purge discarded after its attempts is `purge.failed`, with the
    /// step and the audit trail's error.
    @Test func aPurgeThatFailsIsPurgeFailed() async throws {
        let hook = try await AppWebhookHarness.start()
        let harness = try await WorkerHarness.start(settings: hook.settings().merging(["SIWA_JOB_MAX_ATTEMPTS": "1"]) { $1 })
        try atTestEnd { await harness.stop() }
        harness.downstream.set(.alwaysFail)
        let worker = try harness.startWorker()
        try atTestEnd { await worker.kill9() }
        try await worker.waitForLog("Worker started")
        try await harness.enqueue(subs: ["001.fail.1"])
        #expect(try await eventually(upTo: .seconds(30)) { hook.accepted(sub: "001.fail.1").count == 1 }, "\(worker.log.suffix(3000))")
        let failed = try hook.event(try #require(hook.accepted(sub: "001.fail.1").first))
        #expect(failed.kind == .purgeFailed)
        #expect(failed.data.step == WorkerHarness.httpStep && failed.data.attempts == 1)
        #expect(failed.data.error?.contains("answered HTTP 500") == true, "\(failed.data)")
    }

    /// Off (no worker has SIWA_APP_WEBHOOK_URL): not one delivery job, for
    /// any event; a worker started without the URL turns it off; a replay
    /// is refused.
    @Test func offMeansNoDeliveryJobsAtAll() async throws {
        let setup = try await AccountDeletionTests.Setup.start()
        try atTestEnd { await setup.stop() }
        // As a worker with the URL would have left it: this one turns it off.
        try await setup.database.execute("UPDATE siwa.app_webhook SET enabled = true")
        let worker = try setup.worker.startWorker()
        try atTestEnd { await worker.kill9() }
        try await worker.waitForLog("App events webhook is off")
        #expect(try await setup.database.strings("SELECT enabled::text FROM siwa.app_webhook") == ["false"])
        let server = setup.signIn.server
        for (index, type) in ["email-disabled", "email-enabled", "consent-revoked", "account-delete", "some-future-type"].enumerated() {
            let answer = try await server.post(token: try server.notification(type, sub: "001.off.\(index)"))
            #expect(answer.status == 200)
        }
        _ = try await setup.signedIn("001.off.signin")
        #expect(try await setup.delete("001.off.signin").status == 202)
        #expect(try await eventually(upTo: .seconds(30)) {
            try await setup.database.scalar("SELECT count(*) FROM siwa.jobs WHERE kind = 'purge_user' AND state = 'completed'") == 2
        }, "\(worker.log.suffix(2000))")
        #expect(try await setup.database.scalar("SELECT count(*) FROM siwa.jobs WHERE kind = 'app_event'") == 0)
        let replay = try await runSIWA(["webhooks", "replay", "--since", "1h"], environment: ["SIWA_DATABASE_URL": setup.database.ownerURL])
        #expect(replay.status == 1 && replay.output.contains("the app webhook is off"), "\(replay.output)")
    }

    /// `siwa webhooks test` sends a signed `siwa.test` and prints the answer.
    @Test func webhooksTestSendsASignedTestEvent() async throws {
        let hook = try await AppWebhookHarness.start()
        let ok = try await runSIWA(["webhooks", "test"], environment: hook.settings(rotating: true))
        #expect(ok.status == 0 && ok.output.contains("answered HTTP 204"), "\(ok.output)")
        let delivery = try #require(hook.receiver.deliveries.last)
        #expect(delivery.type == "siwa.test" && delivery.webhookID.hasPrefix("test_"))
        #expect(try hook.event(delivery).kind == .test)
        #expect(AppWebhookHarness.verify(delivery, secret: hook.secret) && AppWebhookHarness.verify(delivery, secret: hook.nextSecret))
        hook.receiver.answer { _, _, _ in 503 }
        let refused = try await runSIWA(["webhooks", "test"], environment: hook.settings())
        #expect(refused.status == 1 && refused.output.contains("answered HTTP 503")
                && refused.output.contains(#"{"error":"try again"}"#), "\(refused.output)")
        let unreachable = try await runSIWA(["webhooks", "test"], environment: hook.settings().merging(
            ["SIWA_APP_WEBHOOK_URL": "http://127.0.0.1:\(try freePort())/siwa/events"]) { $1 })
        #expect(unreachable.status == 1 && unreachable.output.contains("could not reach 127.0.0.1"), "\(unreachable.output)")
    }

    /// `siwa webhooks replay --since T --sub S`: the user's past events go
    /// out again with their webhook-ids; other users' do not.
    @Test func replayReenqueuesPastEventsWithTheirIDs() async throws {
        let setup = try await Setup.start()
        let worker = try await setup.startWorker()
        try atTestEnd { await worker.kill9() }
        let since = Date().addingTimeInterval(-1)
        try await setup.post("email-disabled", sub: "001.replay.1", eventTime: Date().addingTimeInterval(-5))
        try await setup.post("email-enabled", sub: "001.replay.1")
        try await setup.post("email-enabled", sub: "001.replay.2")
        #expect(try await eventually(upTo: .seconds(30)) { setup.receiver.deliveries.count == 3 }, "\(worker.log.suffix(2000))")
        let first = setup.hook.accepted(sub: "001.replay.1").map(\.webhookID)

        let stamp = ISO8601DateFormatter().string(from: since)
        // As an admin's own role, which writes the queue and the trail only
        // through siwa.replay_app_events (sql/017).
        let admin = try await APIKeysTests.loginURL("siwa_test_replay_admin", in: "siwa_admin", for: setup.database)
        let replay = try await runSIWA(["webhooks", "replay", "--since", stamp, "--sub", "001.replay.1"],
                                       environment: ["SIWA_DATABASE_URL": admin])
        #expect(replay.status == 0 && replay.output.contains("enqueued 2 deliveries"), "\(replay.output)")
        #expect(try await eventually(upTo: .seconds(30)) { setup.hook.accepted(sub: "001.replay.1").count == 4 })
        #expect(setup.hook.accepted(sub: "001.replay.1").map(\.webhookID) == first + first)
        #expect(setup.hook.accepted(sub: "001.replay.2").count == 1)
        #expect(try await setup.database.scalar("""
            SELECT count(*) FROM siwa.audit_log WHERE action = 'app_events.replayed' AND details->>'sub' = '001.replay.1'
              AND details->>'enqueued' = '2' AND db_user = 'siwa_test_replay_admin'
            """) == 1)
        // Nothing since a future time; a bad time is refused before anything runs.
        let none = try await runSIWA(["webhooks", "replay", "--since", "2099-01-01"], environment: ["SIWA_DATABASE_URL": setup.database.ownerURL])
        #expect(none.status == 0 && none.output.contains("enqueued 0 deliveries"), "\(none.output)")
        let bad = try await runSIWA(["webhooks", "replay", "--since", "yesterday"], environment: ["SIWA_DATABASE_URL": setup.database.ownerURL])
        #expect(bad.status != 0 && bad.output.contains("--since"), "\(bad.output)")
    }

    /// A bad SIWA_APP_WEBHOOK_* setting stops the worker at start with one
    /// line naming it (exit 2); the secret is never quoted back.
    @Test func badSettingsAreRefusedAtStart() async throws {
        let base = ["SIWA_DATABASE_URL": "postgres://u@127.0.0.1:9/x?sslmode=disable"]
        let good = AppWebhookHarness.newSecret()
        let short = "whsec_" + Data(repeating: 7, count: 16).base64EncodedString()
        let cases: [([String: String], String)] = [
            (["SIWA_APP_WEBHOOK_URL": "ftp://app.internal/x", "SIWA_APP_WEBHOOK_SECRET": good],
             "SIWA_APP_WEBHOOK_URL: expected an http(s) URL, got 'ftp://app.internal/x'"),
            (["SIWA_APP_WEBHOOK_URL": "https://app.internal/x"],
             "SIWA_APP_WEBHOOK_SECRET: is required when SIWA_APP_WEBHOOK_URL is set (e.g. the output of `siwa webhooks secret`)"),
            (["SIWA_APP_WEBHOOK_URL": "https://app.internal/x", "SIWA_APP_WEBHOOK_SECRET": short],
             "SIWA_APP_WEBHOOK_SECRET: the secret holds 16 bytes of key; expected 24 to 64 (siwa webhooks secret makes one)"),
            (["SIWA_APP_WEBHOOK_URL": "https://app.internal/x", "SIWA_APP_WEBHOOK_SECRET": "correct-horse-battery-staple-1234"],
             "SIWA_APP_WEBHOOK_SECRET: expected whsec_ followed by base64 of 24 to 64 random bytes (siwa webhooks secret makes one)"),
            (["SIWA_APP_WEBHOOK_URL": "https://app.internal/x", "SIWA_APP_WEBHOOK_SECRET": good, "SIWA_APP_WEBHOOK_SECRET_NEXT": "whsec_!!"],
             "SIWA_APP_WEBHOOK_SECRET_NEXT: a whsec_ secret must be followed by base64"),
            (["SIWA_APP_WEBHOOK_SECRET": good], "SIWA_APP_WEBHOOK_SECRET: is set but SIWA_APP_WEBHOOK_URL is not (the webhook needs both)"),
            (["SIWA_APP_WEBHOOK_URL": "https://app.internal/x", "SIWA_APP_WEBHOOK_SECRET": good, "SIWA_APP_WEBHOOK_INCLUDE_EMAIL": "yes"],
             "SIWA_APP_WEBHOOK_INCLUDE_EMAIL: expected one of false, true, got 'yes'"),
        ]
        for (settings, message) in cases {
            #expect(throws: (any Error).self) { try WorkerSettings(environment: SettingsReader(base.merging(settings) { $1 })) }
            do {
                _ = try WorkerSettings(environment: SettingsReader(base.merging(settings) { $1 }))
            } catch {
                #expect("\(error)" == message)
            }
        }
        let on = try #require(try WorkerSettings(environment: SettingsReader(base.merging(
            ["SIWA_APP_WEBHOOK_URL": "https://app.internal/x", "SIWA_APP_WEBHOOK_SECRET": good]) { $1 })).appWebhook)
        #expect(on.keys.count == 1 && !on.includeEmail && on.timeoutSeconds == 10)
        #expect(try WorkerSettings(environment: SettingsReader(base)).appWebhook == nil)
        // As the process says it: one line, exit 2, no secret in it.
        for (settings, message) in cases.prefix(3) {
            let result = try await runSIWA(["worker"], environment: base.merging(settings) { $1 })
            #expect(result.status == 2, "\(result.output)")
            #expect(result.output.trimmingCharacters(in: .whitespacesAndNewlines) == "siwa: \(message)", "\(result.output)")
            #expect(!result.output.contains(good.dropFirst(6)) && !result.output.contains(short.dropFirst(6)))
        }
    }
}
