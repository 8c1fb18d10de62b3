import AppleSimulator
import Foundation
import PostgresNIO
import SIWAClient
import Testing

/// `GET /v1/events`, the app events feed, end to end: `siwa serve`
/// in-process with sign-in on, real `siwa worker` processes delivering to a
/// receiver on loopback, and the feed read over HTTP (raw, and through
/// SIWAClient as a backend does) against what the webhook delivered.
@Suite("App events feed", .testDatabases, .timeLimit(.minutes(10)))
struct EventsFeedTests {
    /// serve with sign-in, a worker harness on its database, the receiver.
    struct Setup: Sendable {
        let deletion: AccountDeletionTests.Setup
        let hook: AppWebhookHarness
        var server: ServerHarness { deletion.signIn.server }
        var database: TestDatabase { deletion.database }

        static func start(worker: [String: String] = [:]) async throws -> Setup {
            let hook = try await AppWebhookHarness.start()
            let deletion = try await AccountDeletionTests.Setup.start(worker: hook.settings().merging(worker) { $1 })
            try atTestEnd { await deletion.stop() }
            return Setup(deletion: deletion, hook: hook)
        }

        func startWorker() async throws -> SIWAProcess {
            let worker = try deletion.worker.startWorker()
            try atTestEnd { await worker.kill9() }
            try await worker.waitForLog("Worker started")
            return worker
        }

        func post(_ type: String, sub: String) async throws {
            let answer = try await server.post(token: try server.notification(type, sub: sub))
            guard answer.status == 200 else { throw TestSetupError("\(type) for \(sub) answered \(answer.status): \(answer.text)") }
        }

        func feed(_ query: String) async throws -> HTTPAnswer {
            try await HTTPAnswer.send(method: .GET, url: server.apiURL + "/v1/events" + query, body: nil,
                                      headers: [("Authorization", "Bearer \(deletion.signIn.key)")])
        }

        /// Every page from `after`, `limit` at a time, as raw answers.
        func pages(after: String? = nil, limit: Int) async throws -> [HTTPAnswer] {
            var answers: [HTTPAnswer] = []
            var cursor = after
            while answers.count < 200 {
                let answer = try await feed("?limit=\(limit)" + (cursor.map { "&after=\($0)" } ?? ""))
                guard answer.status == 200 else { throw TestSetupError("the feed answered \(answer.status): \(answer.text)") }
                answers.append(answer)
                cursor = answer.json["next"] as? String
                if answer.json["has_more"] as? Bool != true { return answers }
            }
            throw TestSetupError("the feed never said it was caught up")
        }

        func appEventJobs(_ condition: String) async throws -> Int {
            try await database.scalar("SELECT count(*) FROM siwa.jobs WHERE kind = 'app_event' AND \(condition)")
        }
    }

    /// An event id's place in siwa's order: (audit seq, n).
    static func order(_ id: String) -> [Int] {
        id.split(separator: "_").dropFirst().compactMap { Int($0) }
    }

    static func events(_ answer: HTTPAnswer) -> [(id: String, event: NSDictionary)] {
        (answer.json["events"] as? [[String: Any]] ?? []).map {
            ($0["id"] as? String ?? "", NSDictionary(dictionary: $0["event"] as? [String: Any] ?? [:]))
        }
    }

    /// The feed answers what the webhook delivered: the same ids, the same
    /// bodies byte for byte, in siwa's order, page by page with `limit`; and
    /// SIWAClient reads the same events from it as from the deliveries.
    @Test func theFeedAnswersTheWebhooksIdsAndBodiesInOrder() async throws {
        let setup = try await Setup.start()
        let worker = try await setup.startWorker()
        for (index, type) in ["email-disabled", "consent-revoked", "account-delete", "email-enabled", "some-future-type"].enumerated() {
            try await setup.post(type, sub: "001.feed.\(index % 3)")
        }
        _ = try await setup.deletion.signedIn("001.feed.9")
        // Every delivery made (the deletion's purge.completed included).
        #expect(try await eventually(upTo: .seconds(60)) {
            let pending = try await setup.appEventJobs("state <> 'completed'")
            let made = try await setup.appEventJobs("true")
            return pending == 0 && made >= 8
        }, "\(worker.log.suffix(3000))")
        let deliveries = setup.hook.receiver.deliveries.filter { (200..<300).contains($0.status) }

        let pages = try await setup.pages(limit: 3)
        let fed = pages.flatMap(Self.events)
        #expect(pages.count == (fed.count + 2) / 3, "pages of 3: \(pages.map(\.text))")
        #expect(pages.dropLast().allSatisfy { Self.events($0).count == 3 && $0.json["has_more"] as? Bool == true })
        #expect(fed.map(\.id) == fed.map(\.id).sorted { Self.order($0).lexicographicallyPrecedes(Self.order($1)) }, "in order")
        #expect(Set(fed.map(\.id)).count == fed.count, "no event twice")
        #expect(Set(fed.map(\.id)) == Set(deliveries.map(\.webhookID)), "\(fed.map(\.id)) vs \(deliveries.map(\.webhookID))")
        let raw = pages.map(\.text).joined()
        for delivery in deliveries {
            let body = String(decoding: delivery.body, as: UTF8.self)
            #expect(raw.contains(#"{"event":\#(body),"id":"\#(delivery.webhookID)"}"#), "\(delivery.webhookID): \(body) not in \(raw)")
            let event = try #require(fed.first { $0.id == delivery.webhookID }).event
            #expect(event == NSDictionary(dictionary: delivery.envelope))
        }
        // The last page's next is the last event's id: asking from it is caught up.
        let caughtUp = try await setup.feed("?after=\(try #require(fed.last?.id))")
        #expect(caughtUp.status == 200 && Self.events(caughtUp).isEmpty && caughtUp.json["has_more"] as? Bool == false
                && caughtUp.json["next"] as? String == fed.last?.id, "\(caughtUp.text)")

        // A backend on SIWAClient: the same AppEvents as its webhook handler decodes.
        let client = try setup.deletion.signIn.client()
        var read: [AppEvent] = []
        let cursor = try await client.catchUp(after: nil, limit: 2) { read.append($0) }
        #expect(cursor == fed.last?.id)
        #expect(read.map(\.id) == fed.map(\.id))
        for delivery in deliveries {
            #expect(read.first { $0.id == delivery.webhookID } == (try setup.hook.event(delivery)), "\(delivery.webhookID)")
        }
        let page = try await client.events(after: fed.first?.id, limit: 1)
        #expect(page.events.map(\.id) == [fed[1].id] && page.hasMore && page.next == fed[1].id)
    }

    /// The app is down past the last attempt: its deliveries are discarded.
    /// Back up, it catches up through the feed from the last event it
    /// processed: every event it missed, once, in order, and nothing else.
    @Test func aBackendDownPastTheLastRetryCatchesUpThroughTheFeed() async throws {
        let setup = try await Setup.start(worker: ["SIWA_JOB_MAX_ATTEMPTS": "2"])
        let worker = try await setup.startWorker()
        try await setup.post("email-disabled", sub: "001.down.0")
        #expect(try await eventually(upTo: .seconds(30)) { !setup.hook.accepted(sub: "001.down.0").isEmpty }, "\(worker.log.suffix(2000))")
        let lastSeen = try #require(setup.hook.accepted(sub: "001.down.0").last?.webhookID)

        setup.hook.receiver.answer { _, _, _ in 503 }
        for (index, type) in ["email-enabled", "consent-revoked", "account-delete", "email-disabled", "email-enabled"].enumerated() {
            try await setup.post(type, sub: "001.down.\(index % 3)")
        }
        // Each user's deliveries go in turn, each refused twice, then discarded.
        // (The deletion's purge.completed comes once its purge has run.)
        #expect(try await eventually(upTo: .seconds(90)) {
            let discarded = try await setup.appEventJobs("state = 'discarded'")
            let pending = try await setup.appEventJobs("state IN ('available', 'running', 'retryable')")
            return discarded >= 7 && pending == 0
        }, "\(worker.log.suffix(3000))")
        let missed = try await setup.database.strings("""
            SELECT args->>'event_id' FROM siwa.jobs WHERE kind = 'app_event' AND state = 'discarded'
            ORDER BY (args->>'audit_seq')::bigint, args->>'event_id'
            """)
        #expect(missed.count >= 7, "the five events, a consent.revoked and a purge.completed: \(missed)")
        #expect(setup.hook.receiver.deliveries.filter { (200..<300).contains($0.status) }.map(\.webhookID) == [lastSeen])

        // Back up: the backend reads from what it last processed.
        var seen: Set<String> = [lastSeen]
        var caughtUp: [String] = []
        let client = try setup.deletion.signIn.client()
        let cursor = try await client.catchUp(after: lastSeen, limit: 2) { event in
            if seen.insert(event.id).inserted { caughtUp.append(event.id) }
        }
        #expect(caughtUp == missed, "nothing missing, nothing twice, in order")
        #expect(cursor == missed.last)
        // Nothing more from there, and nothing the backend had already.
        #expect(try await client.events(after: cursor).events.isEmpty)
        let again = try await client.catchUp(after: lastSeen) { _ in }
        #expect(again == cursor)
    }

    /// A bad `limit` or `after` is a 400 with a reason, never a 5xx; the
    /// feed answers with the webhook off too (no worker here).
    @Test func aBadCursorOrLimitIsRefusedWithAReason() async throws {
        let setup = try await Setup.start()
        try await setup.post("email-disabled", sub: "001.bad.0")
        try await setup.post("email-enabled", sub: "001.bad.0")
        let first = try await setup.feed("?limit=1")
        #expect(first.status == 200 && first.json["has_more"] as? Bool == true, "\(first.text)")
        let id = try #require(Self.events(first).first?.id)
        #expect(Self.events(first).first?.event["type"] as? String == "apple.email-disabled")

        for limit in ["0", "1001", "-1", "ten", "", "1.5"] {
            let answer = try await setup.feed("?limit=\(limit)")
            #expect(answer.status == 400 && answer.reason == "bad_limit", "limit=\(limit): \(answer.status) \(answer.text)")
        }
        for after in ["xyz", "evt_", "evt_1", "evt_a_1", "evt_1_1_1", "evt_-1_1", "evt_99999999999999999999_1", "", "evt_0_1"] {
            let answer = try await setup.feed("?after=\(after)")
            #expect(answer.status == 400 && answer.reason == "bad_cursor", "after=\(after): \(answer.status) \(answer.text)")
        }
        // Well formed, but no event: a seq past the end, a row's third event,
        // a row that is no event.
        let seq = Self.order(id)[0]
        let notAnEvent = try await setup.database.scalar(
            "SELECT seq FROM siwa.audit_log WHERE action <> 'notification.recorded' ORDER BY seq DESC LIMIT 1")
        #expect(notAnEvent > 0, "the API key's creation is audited")
        for after in ["evt_999999999_1", "evt_\(seq)_3", "evt_\(notAnEvent)_1"] {
            let answer = try await setup.feed("?after=\(after)")
            #expect(answer.status == 400 && answer.reason == "unknown_cursor", "after=\(after): \(answer.status) \(answer.text)")
        }
        #expect(try await setup.feed("?team=NOTATEAM00").reason == "unknown_team")
        #expect(try await setup.feed("?client_id=com.example.nobody").reason == "unknown_client")
        let paged = try await setup.feed("?after=\(id)&limit=1000&team=\(TestEnvironment.team)")
        #expect(paged.status == 200 && Self.events(paged).map { $0.event["type"] as? String } == ["apple.email-enabled"], "\(paged.text)")
        let unauthorized = try await HTTPAnswer.send(method: .GET, url: setup.server.apiURL + "/v1/events", body: nil, headers: [])
        #expect(unauthorized.status == 401)
        do {
            _ = try await setup.deletion.signIn.client().events(after: "evt_999999999_1")
            Issue.record("an unknown cursor was answered")
        } catch let refusal as SIWARefusal {
            #expect(refusal.status == 400 && refusal.code == "unknown_cursor")
        }
    }

    /// Events recorded longer ago than SIWA_EVENTS_FEED_RETENTION_DAYS are
    /// out of the feed: without a cursor it starts after them; a cursor
    /// whose next event aged out unread is 410 `cursor_expired` (answering
    /// on would skip it); one whose next event is young is good, however
    /// old the cursor's own event.
    @Test func eventsOlderThanTheRetentionAreOutOfTheFeed() async throws {
        let setup = try await Setup.start()
        for index in 0..<4 { try await setup.post(index % 2 == 0 ? "email-disabled" : "email-enabled", sub: "001.old.\(index)") }
        let all = Self.events(try await setup.feed("")).map(\.id)
        #expect(all.count == 4)
        // The first two recorded 40 days ago (as the owner, past the
        // trail's guard: the test's stand-in for time passing).
        let seq = Self.order(all[1])[0]
        try await setup.database.withClient { client in
            for sql in ["ALTER TABLE siwa.audit_log DISABLE TRIGGER audit_log_append_only",
                        "UPDATE siwa.audit_log SET occurred_at = occurred_at - interval '40 days' WHERE seq <= \(seq)",
                        "ALTER TABLE siwa.audit_log ENABLE TRIGGER audit_log_append_only"] {
                try await client.query(PostgresQuery(unsafeSQL: sql), logger: TestEnvironment.logger)
            }
        }
        let fresh = try await setup.feed("")
        #expect(Self.events(fresh).map(\.id) == Array(all[2...]), "\(fresh.text)")
        let expired = try await setup.feed("?after=\(all[0])")
        #expect(expired.status == 410 && expired.reason == "cursor_expired", "\(expired.status) \(expired.text)")
        let good = try await setup.feed("?after=\(all[1])")
        #expect(good.status == 200 && Self.events(good).map(\.id) == Array(all[2...]), "\(good.text)")

        // A longer retention keeps them.
        let longer = try await ServerHarness.start(database: setup.database, settings: ["SIWA_EVENTS_FEED_RETENTION_DAYS": "45"],
                                                   signIn: try SignInFixture.files())
        try atTestEnd { await longer.stop() }
        let kept = try await HTTPAnswer.send(method: .GET, url: longer.apiURL + "/v1/events?after=\(all[0])", body: nil,
                                             headers: [("Authorization", "Bearer \(setup.deletion.signIn.key)")])
        #expect(kept.status == 200 && Self.events(kept).map(\.id) == Array(all[1...]), "\(kept.text)")
    }
}
