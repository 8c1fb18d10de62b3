import AccountLifecycle
import AccountStore
import AppleSignIn
import ChildProcesses
import Foundation
import SIWAConfiguration
import Testing

/// docs/openapi.yaml against the code: its paths are the routers' routes,
/// listener by listener, both ways; every reason code the code can answer
/// is in one of its enumerations, and every one there is one the code
/// answers; its enumerations of states, kinds and statuses are the code's.
/// And the check `make test` ends with (scripts/openapi-check.py over every
/// answer and app event the suite received) fails an answer that breaks its
/// schema. The document is read by that script (Debian's python3-yaml;
/// `make test` installs it): on a developer's machine without it these
/// tests say so and check nothing; under CI they fail.
@Suite("OpenAPI document")
struct OpenAPITests {
    static let document = TestEnvironment.repositoryRoot.appendingPathComponent("docs/openapi.yaml").path
    static let script = TestEnvironment.repositoryRoot.appendingPathComponent("scripts/openapi-check.sh").path

    /// `scripts/openapi-check.sh arguments`: its exit status and stdout (stderr apart).
    static func check(_ arguments: [String]) async throws -> (status: Int32, output: String, errors: String) {
        let directory = FileManager.default.temporaryDirectory
        let output = directory.appendingPathComponent("openapi-\(UUID().uuidString).out").path
        let errors = output + ".err"
        defer {
            try? FileManager.default.removeItem(atPath: output)
            try? FileManager.default.removeItem(atPath: errors)
        }
        let quoted = ([script] + arguments).map { "'\($0)'" }.joined(separator: " ")
        let child = try ChildProcess(executable: "/bin/sh", arguments: ["-c", "exec \(quoted) 2>'\(errors)'"],
                                     environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"],
                                     outputFile: output)
        let status = await child.wait()
        return (status, (try? String(contentsOfFile: output, encoding: .utf8)) ?? "",
                (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")
    }

    /// The script's JSON answer; nil (and why, as a warning) when no Python
    /// with yaml and jsonschema is installed on a developer's machine.
    static func json(_ command: String) async throws -> Any? {
        let (status, output, errors) = try await check([command, document])
        if status == 127 {
            guard TestEnvironment.isCI else {
                print("warning: \(errors.trimmingCharacters(in: .whitespacesAndNewlines)): docs/openapi.yaml is not checked")
                return nil
            }
            Issue.record("under CI docs/openapi.yaml must be checked: \(errors)")
            return nil
        }
        try #require(status == 0, "openapi-check.py \(command): exit \(status): \(errors)")
        return try JSONSerialization.jsonObject(with: Data(output.utf8))
    }

    @Test func theDocumentsPathsAreTheRoutersRoutesListenerByListener() async throws {
        guard let documented = try await Self.json("routes") as? [String: [String]] else { return }
        let registered = try await DocsTests.routesByListener()
        #expect(Set(documented.keys) == Set(registered.keys), "listeners: \(documented.keys.sorted()) vs \(registered.keys.sorted())")
        for (listener, routes) in registered {
            let routers = Set(routes.map { DocsTests.normalized($0.method, $0.path) })
            let paths = Set((documented[listener] ?? []).map { route in
                let parts = route.split(separator: " ", maxSplits: 1).map(String.init)
                return DocsTests.normalized(parts[0], parts[1])
            })
            for route in routers.subtracting(paths).sorted() {
                Issue.record("the \(listener) listener registers `\(route)`, which docs/openapi.yaml has not under that listener")
            }
            for route in paths.subtracting(routers).sorted() {
                Issue.record("docs/openapi.yaml has `\(route)` on the \(listener) listener, which its router does not register")
            }
        }
        #expect(registered["api"]?.count == 4 && (registered["admin"]?.count ?? 0) >= 10, "\(registered)")
    }

    @Test func everyOperationHasAUniqueOperationIDAndATag() async throws {
        guard let document = try await Self.json("json") as? [String: Any] else { return }
        var ids: [String] = []
        for section in ["paths", "webhooks"] {
            for (path, item) in document[section] as? [String: [String: Any]] ?? [:] {
                for method in ["get", "put", "post", "delete", "patch"] {
                    guard let operation = item[method] as? [String: Any] else { continue }
                    let id = operation["operationId"] as? String ?? ""
                    #expect(!id.isEmpty, "\(method.uppercased()) \(path) has no operationId")
                    ids.append(id)
                    if section == "paths" {
                        // Its tag is its listener (the first of its servers), so a reader, and schemathesis, can tell.
                        let servers = item["servers"] as? [[String: Any]] ?? document["servers"] as? [[String: Any]] ?? []
                        let listener = servers.first?["x-siwa-listener"] as? String
                        #expect(listener != nil && operation["tags"] as? [String] == [listener ?? ""],
                                "\(method.uppercased()) \(path): tags \(operation["tags"] ?? "none"), listener \(listener ?? "none")")
                    }
                }
            }
        }
        #expect(ids.count == Set(ids).count, "duplicate operationIds: \(ids.sorted())")
        // The document is the contract of this version of siwa.
        #expect((document["info"] as? [String: Any])?["version"] as? String == SIWAVersion.version)
        #expect(ids.count > 30)
    }

    // MARK: Reason codes

    /// Every `error` code siwa's sources can answer: the literals handed to
    /// the answers' constructors (`reason: "…"`, `APIResponse.error(.status,
    /// "…"`, `ErrorAnswer("…"`, SignInAnswer's `refused(.status, "…"`, the
    /// admin job routes' `(.status, "…")`) and the verifier's `reason` switch.
    static func reasonCodesInTheCode() throws -> Set<String> {
        let sources = TestEnvironment.repositoryRoot.appendingPathComponent("Sources")
        let files = ["SIWAServer", "AccountLifecycle/SignIn", "AccountLifecycle/Notifications"].flatMap { directory in
            (FileManager.default.enumerator(atPath: sources.appendingPathComponent(directory).path)?.allObjects as? [String] ?? [])
                .filter { $0.hasSuffix(".swift") }
                .map { sources.appendingPathComponent(directory).appendingPathComponent($0) }
        } + [sources.appendingPathComponent("AppleSignIn/VerificationFailure.swift")]
        let patterns = [
            #"reason: "([a-z][a-z_]*)""#,
            // (Not `\b`: Swift's word boundaries keep `AdminResponse.error` one word.)
            #"(?:^|[^A-Za-z])error\(\s*\.[A-Za-z]+, "([a-z][a-z_]*)""#,
            #"ErrorAnswer\("([a-z][a-z_]*)""#,
            #"refused\(\.[A-Za-z]+, "([a-z][a-z_]*)""#,
            #"\(\.[A-Za-z]+, "([a-z][a-z_]*)"\)"#,
        ]
        var codes = Set<String>()
        for file in files {
            let text = try String(contentsOf: file, encoding: .utf8)
            // The verifier's codes: its `reason` switch.
            let own = file.lastPathComponent == "VerificationFailure.swift" ? [#"case \.[A-Za-z]+: "([a-z][a-z_]*)""#] : []
            for pattern in patterns + own {
                for match in text.matches(of: try Regex(pattern)) {
                    if let code = match.output[1].substring { codes.insert(String(code)) }
                }
            }
        }
        return codes
    }

    @Test func everyReasonCodeTheCodeAnswersIsInTheDocumentAndNoOther() async throws {
        let code = try Self.reasonCodesInTheCode()
        // The scan finds what it must (else a pattern broke, and the test would pass on nothing).
        for known in ["empty_body", "bad_signature", "nonce_missing", "invalid_grant", "team_required", "stale_identity_token",
                      "apple_rejected_client", "bad_parameter", "bad_csrf_token", "conflict", "too_many_failures", "unauthorized"] {
            #expect(code.contains(known), "the scan of Sources/ no longer finds `\(known)`")
        }
        guard let documented = try await Self.json("reasons") as? [String] else { return }
        for missing in code.subtracting(documented).sorted() {
            Issue.record("siwa can answer `\(missing)`, which no enumeration of docs/openapi.yaml has")
        }
        for extra in Set(documented).subtracting(code).sorted() {
            Issue.record("docs/openapi.yaml enumerates `\(extra)`, which no source of siwa answers")
        }
    }

    // MARK: Enumerations

    @Test func theEnumerationsAreTheCodes() async throws {
        guard let document = try await Self.json("json") as? [String: Any] else { return }
        let schemas = (document["components"] as? [String: Any])?["schemas"] as? [String: [String: Any]] ?? [:]
        func strings(_ name: String) -> [String] { schemas[name]?["enum"] as? [String] ?? [] }
        #expect(strings("JobState") == JobState.allCases.map(\.rawValue))
        #expect(Set(strings("JobKind")) == Set(JobKinds.names))
        // The users' statuses: sql/001's CHECK.
        let schema = try String(contentsOf: TestEnvironment.repositoryRoot.appendingPathComponent("sql/001_schema.sql"), encoding: .utf8)
        let check = try #require(schema.firstMatch(of: #/status IN \(([^)]*)\)/#))
        let statuses = check.output.1.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " '")) }
        #expect(Set(strings("UserStatus")) == Set(statuses), "\(statuses)")
        // The identity token's codes are the verifier's, every one also a sign-in's.
        let verifier = try String(contentsOf: TestEnvironment.repositoryRoot.appendingPathComponent("Sources/AppleSignIn/VerificationFailure.swift"),
                                  encoding: .utf8)
        let verifierCodes = Set(verifier.matches(of: #/case \.[A-Za-z]+: "([a-z][a-z_]*)"/#).map { String($0.output.1) })
        #expect(verifierCodes.count > 20 && Set(strings("IdentityTokenReasonCode")) == verifierCodes)
        #expect(verifierCodes.isSubset(of: strings("SignInReasonCode")))
        // 0 to 2 as bounds (swift-openapi-generator refuses null in an integer enum).
        let bounds = (schemas["RealUserStatus"]?["minimum"] as? Int, schemas["RealUserStatus"]?["maximum"] as? Int)
        #expect(bounds.0 == 0 && bounds.1 == 2 && [0, 1, 2].allSatisfy { RealUserStatus(claim: $0).rawValue == $0 }, "\(bounds)")
    }

    // MARK: Tolerant for clients, strict for siwa

    /// A client generated from the published documents keeps decoding an
    /// answer or event with a field a newer siwa adds: neither says
    /// `additionalProperties: false` anywhere (the contract check adds it
    /// while it validates, below).
    @Test func thePublishedDocumentsLetAClientDecodeAFieldTheyDoNotList() async throws {
        for name in ["docs/openapi.yaml", "docs/openapi-3.0.yaml"] {
            let path = TestEnvironment.repositoryRoot.appendingPathComponent(name).path
            let (status, output, errors) = try await Self.check(["loose", path])
            if status == 127, !TestEnvironment.isCI { return }
            #expect(status == 0, "\(errors)")
            #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == "[]",
                    "\(name) says additionalProperties: false at \(output): a generated client would refuse a field siwa adds")
        }
    }

    /// docs/openapi-3.0.yaml, for the generators that read only 3.0, is
    /// scripts/openapi-3.0.py's rendering of docs/openapi.yaml as it is now.
    @Test func theOpenAPI30RenderingIsTheDocumentAsItIs() async throws {
        let rendering = TestEnvironment.repositoryRoot.appendingPathComponent("docs/openapi-3.0.yaml").path
        let (status, output, errors) = try await Self.check(["in-step", Self.document, rendering])
        if status == 127, !TestEnvironment.isCI { return }
        #expect(status == 0, "\(output) \(errors)")
    }

    // MARK: The check at the end of make test

    /// scripts/openapi-check.py fails what breaks the document, naming it,
    /// and passes what keeps it: a check that could not fail would prove nothing.
    @Test func theAnswerCheckFailsABrokenAnswerAndPassesAGoodOne() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("openapi-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func records(_ lines: [[String: Any]]) throws -> String {
            let file = directory.appendingPathComponent("\(UUID().uuidString).jsonl")
            let text = try lines.map { String(decoding: try JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys]), as: UTF8.self) }
            try (text.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
            return file.path
        }
        func answer(_ listener: String, _ method: String, _ path: String, _ status: Int, _ body: String) -> [String: Any] {
            ["kind": "http", "listener": listener, "method": method, "path": path, "status": status,
             "content_type": "application/json; charset=utf-8", "body": body]
        }
        let signedIn = #"{"apple_sub":"001.a.1","client_id":"com.example.app","email":null,"email_verified":null,"family_name":null,"given_name":null,"is_new_user":true,"is_private_email":null,"real_user_status":2,"refresh_token_stored":false,"status":"active","team":"TEAM123456","user_id":7}"#
        let event: [String: Any] = [
            "kind": "event", "headers": ["webhook-id": "evt_12_1", "webhook-timestamp": "1795680001", "webhook-signature": "v1,x"],
            "body": #"{"type":"user.signed_in","timestamp":"2026-11-26T08:00:00.035000Z","data":{"sub":"001.a.1","team":"TEAM123456","user_id":7,"is_new_user":true,"refresh_token_stored":false}}"#,
        ]
        let good = try records([
            answer("api", "POST", "/v1/sign-in", 200, signedIn),
            answer("public", "POST", "/apple/notifications", 400, #"{"error":"wrong_aud","detail":"aud is not one of the configured client ids"}"#),
            answer("admin", "GET", "/admin/audit/verify", 200, #"{"head":null,"ok":true,"rows":0,"unsealed":0}"#),
            ["kind": "http", "listener": "public", "method": "GET", "path": "/admin", "status": 404, "content_type": "", "body": ""],
            answer("public", "GET", "/apple/notifications", 405, #"{"error":"method_not_allowed","detail":"This path answers POST only."}"#),
            event,
        ])
        let passed = try await Self.check(["validate", Self.document, good])
        if passed.status == 127, !TestEnvironment.isCI { return }
        #expect(passed.status == 0, "\(passed.output) \(passed.errors)")

        let broken = try records([
            answer("api", "POST", "/v1/sign-in", 200, signedIn.replacingOccurrences(of: #","status":"active""#, with: "")),
            answer("public", "POST", "/apple/notifications", 400, #"{"error":"not_a_code","detail":"x"}"#),
            answer("api", "GET", "/v1/users/001.a.1", 418, #"{"error":"teapot","detail":"x"}"#),
            ["kind": "http", "listener": "public", "method": "GET", "path": "/nope", "status": 200, "content_type": "", "body": ""],
            ["kind": "http", "listener": "api", "method": "PUT", "path": "/v1/users/001.a.1", "status": 404, "content_type": "", "body": ""],
            ["kind": "event", "headers": event["headers"] ?? [:], "body": #"{"type":"user.vanished","timestamp":"2026-11-26T08:00:00Z","data":{}}"#],
            ["kind": "event", "headers": event["headers"] ?? [:],
             "body": #"{"type":"user.signed_in","timestamp":"yesterday","data":{"sub":"001.a.1","user_id":7,"is_new_user":true,"refresh_token_stored":false}}"#],
            // Fields the document does not list: it publishes no additionalProperties: false,
            // yet the check holds siwa's own answers and events to it.
            answer("admin", "GET", "/admin/audit/verify", 200, #"{"head":null,"ok":true,"rows":0,"unsealed":0,"surprise":1}"#),
            ["kind": "event", "headers": event["headers"] ?? [:],
             "body": #"{"type":"purge.completed","timestamp":"2026-11-26T08:00:00Z","data":{"sub":"001.a.1","job_id":3,"scope":"all","unlisted":true}}"#],
        ])
        let failed = try await Self.check(["validate", Self.document, broken])
        #expect(failed.status == 1, "\(failed.output) \(failed.errors)")
        for why in ["'status' is a required property", "not_a_code", "status 418 is not documented", "GET /nope", "PUT /v1/users/001.a.1",
                    "'user.vanished'", "is not a 'date-time'",
                    "('surprise' was unexpected)", "('unlisted' was unexpected)"] {
            #expect(failed.errors.contains(why), "the check does not say \(why): \(failed.errors)")
        }

        // A run of the whole suite (--coverage) fails too when a documented
        // success answer or app event was never given, naming each; those
        // the records gave are not named.
        let uncovered = try await Self.check(["validate", "--coverage", Self.document, good])
        #expect(uncovered.status == 1, "\(uncovered.output) \(uncovered.errors)")
        for why in ["no test gave the app event purge.cancelled", "no test gave listAuditEntries 200"] {
            #expect(uncovered.errors.contains(why), "the check does not say \(why): \(uncovered.errors)")
        }
        #expect(!uncovered.errors.contains("the app event user.signed_in") && !uncovered.errors.contains("signIn 200"),
                "\(uncovered.errors)")
    }
}
