import AccountLifecycle
import AccountStore
import AppleSignIn
import AsyncHTTPClient
import Crypto
import Foundation
import Hummingbird
import Logging
import PostgresNIO
import SIWAConfiguration
import SIWAServer
import Testing

/// docs/ says what siwa has, and only that: every setting, subcommand,
/// route, metric and alert is named in docs/, and docs/ (and the README)
/// name none that does not exist. The README stays short, and every
/// relative link of the docs reaches a file and a heading. No database:
/// the routers are built on clients that never connect.
@Suite("Docs")
struct DocsTests {
    static let root = TestEnvironment.repositoryRoot

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// docs/*.md, by path from the repository's root.
    static func docsPages() throws -> [String: String] {
        let names = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
        var pages: [String: String] = [:]
        for name in names where name.hasSuffix(".md") { pages["docs/" + name] = try text("docs/" + name) }
        return pages
    }

    /// Where a name must be found: all of docs/.
    static func docs() throws -> String { try docsPages().values.joined(separator: "\n") }

    /// Where no name may be made up: docs/ and the README.
    static func docsAndReadme() throws -> [String: String] {
        try docsPages().merging(["README.md": try text("README.md")]) { $1 }
    }

    static func matches(_ pattern: String, in text: String) throws -> [Substring] {
        try text.matches(of: Regex(pattern)).map { $0.output[1].substring ?? $0.output[0].substring ?? "" }
    }

    /// `name` appears in `text` as a whole word (not a prefix of a longer name).
    static func names(_ name: String, in text: String) -> Bool {
        var range = text.startIndex..<text.endIndex
        while let found = text.range(of: name, range: range) {
            let next = found.upperBound < text.endIndex ? text[found.upperBound] : " "
            if !(next.isLetter || next.isNumber || next == "_") { return true }
            range = found.upperBound..<text.endIndex
        }
        return false
    }

    // MARK: The README

    @Test func theReadmeIsAtMost300Lines() throws {
        let lines = try Self.text("README.md").split(separator: "\n", omittingEmptySubsequences: false).count
        #expect(lines <= 300, "README.md has \(lines) lines: move the detail to docs/")
    }

    // MARK: Settings

    @Test func everySettingIsInTheDocsAndNoOther() throws {
        let docs = try Self.docs()
        for setting in SettingsCatalog.all {
            #expect(Self.names(setting.name, in: docs), "\(setting.name) is in no page of docs/ (docs/settings.md's table: `siwa settings --markdown`)")
        }
        // A secret's NAME_FILE, the file its value may come from, is known too.
        let known = Set(SettingsCatalog.all.map(\.name)).union(SettingsCatalog.fileVariables)
        // The misspelling settings.md shows as what start-up reports.
        let examples: Set<String> = ["SIWA_HTTP_PROT"]
        for (page, text) in try Self.docsAndReadme() {
            for token in try Self.matches(#"(SIWA_[A-Z0-9_]+)"#, in: text).map(String.init) {
                if token.hasSuffix("_") {
                    // A prefix: the tools' own, or one that begins settings.
                    #expect(SettingsCatalog.toolPrefixes.contains(token) || known.contains { $0.hasPrefix(token) },
                            "\(page) names \(token)*, which begins no setting")
                } else {
                    #expect(known.contains(token) || examples.contains(token) || SettingsCatalog.toolPrefixes.contains { token.hasPrefix($0) },
                            "\(page) names \(token), which is not a setting")
                }
            }
        }
    }

    // MARK: Subcommands

    /// Every command path of the built `siwa` (`siwa`, `siwa jobs`,
    /// `siwa jobs list`, ...), from ArgumentParser's own dump of the tree.
    static func commandTree() async throws -> [String: Set<String>] {
        let result = try await runSIWA(["--experimental-dump-help"])
        #expect(result.status == 0, "siwa --experimental-dump-help: \(result.output)")
        let json = try #require(result.output.firstIndex(of: "{").map { result.output[$0...] })
        struct Dump: Decodable { var command: Command }
        struct Command: Decodable { var commandName: String; var subcommands: [Command]? }
        let dump = try JSONDecoder().decode(Dump.self, from: Data(json.utf8))
        var tree: [String: Set<String>] = [:]
        func walk(_ command: Command, path: String) {
            let children = (command.subcommands ?? []).filter { $0.commandName != "help" }
            tree[path] = Set(children.map(\.commandName))
            for child in children { walk(child, path: path + " " + child.commandName) }
        }
        walk(dump.command, path: "siwa")
        return tree
    }

    /// The text of inline code and fenced blocks: where a command is written.
    static func code(_ markdown: String) throws -> [Substring] {
        var spans: [Substring] = []
        var fenced = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { fenced.toggle(); continue }
            // A shell comment in a fenced block is prose, not a command.
            if fenced { spans.append(line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]); continue }
            spans += try matches("`([^`]+)`", in: String(line))
        }
        return spans
    }

    @Test func everySubcommandIsInTheDocsAndNoOther() async throws {
        let tree = try await Self.commandTree()
        #expect(tree["siwa"]?.contains("serve") == true && tree["siwa jobs"]?.contains("list") == true, "\(tree)")
        let docs = try Self.docs()
        for path in tree.keys.sorted() where path != "siwa" {
            #expect(Self.namesCommand(path, in: docs), "`\(path)` is in no page of docs/ (docs/cli.md)")
        }
        for (page, text) in try Self.docsAndReadme() {
            for span in try Self.code(text) {
                for match in try String(span).matches(of: Regex(#"(?:^|[\s(|;&])siwa ([a-z][a-z-]*)(?:[ ]+([a-z][a-z-]*))?(?![A-Za-z0-9_./-])"#)) {
                    guard let first = match.output[1].substring.map(String.init) else { continue }
                    let top = "siwa " + first
                    if first == "help" { continue }  // ArgumentParser's own `siwa help COMMAND`
                    guard let children = tree[top] else {
                        Issue.record("\(page): `siwa \(first)` is not a siwa subcommand (in `\(span)`)")
                        continue
                    }
                    if let second = match.output[2].substring.map(String.init), !children.isEmpty {
                        #expect(children.contains(second), "\(page): `\(top) \(second)` is not a subcommand of `\(top)` (in `\(span)`)")
                    }
                }
            }
        }
    }

    /// `siwa jobs` named as a command, not as the start of `siwa jobs-x`.
    static func namesCommand(_ path: String, in text: String) -> Bool {
        var range = text.startIndex..<text.endIndex
        while let found = text.range(of: path, range: range) {
            let next = found.upperBound < text.endIndex ? text[found.upperBound] : " "
            if !(next.isLetter || next.isNumber || next == "_" || next == "-") { return true }
            range = found.upperBound..<text.endIndex
        }
        return false
    }

    // MARK: Routes

    /// `METHOD /path` with every capture written `{}`.
    static func normalized(_ method: String, _ path: String) -> String {
        var path = path
        while path.count > 1, let last = path.last, ".,:;".contains(last) { path.removeLast() }
        let components = path.split(separator: "/", omittingEmptySubsequences: false).map { component in
            component.hasPrefix("{") || component.hasPrefix(":") ? "{}" : String(component)
        }
        return method + " " + components.joined(separator: "/")
    }

    /// The routes the public listener, the API listener (sign-in on) and the
    /// admin listener register, from Hummingbird's own list
    /// (`Router.routes`); the worker's listener has the public one's health routes.
    static func routes() async throws -> Set<String> {
        Set(try await routesByListener().values.joined().map { normalized($0.method, $0.path) })
    }

    /// Each listener's routes (`public`, `api`, `admin`, `metrics`, `worker`), as
    /// Hummingbird lists them: the method and the path with its captures
    /// written `:name` (OpenAPITests reads them).
    static func routesByListener() async throws -> [String: [(method: String, path: String)]] {
        let logger = Logger(label: "siwa.docs-test", factory: { _ in SwiftLogNoOpLogHandler() })
        let settings = try ServerSettings(environment: SettingsReader([
            "SIWA_DATABASE_URL": "postgres://siwa_serve@127.0.0.1:1/siwa", "SIWA_APPLE_TEAM_ID": TestEnvironment.team, "SIWA_APPLE_CLIENT_IDS": "com.example.app",
        ]))
        // Clients that are never run: nothing connects.
        let client = PostgresClient(configuration: try settings.database.configuration().postgresClientConfiguration,
                                    backgroundLogger: logger)
        let registry = SIWAMetrics.makeRegistry()
        let metrics = SIWAMetrics.factory(for: registry)
        let keys = AppleKeySet(source: StaticJWKS(data: Data(#"{"keys":[]}"#.utf8)), logger: logger)
        let policy = VerificationPolicy(audiences: ["com.example.app"])
        let receiver = NotificationReceiver(
            verifier: NotificationVerifier(keys: keys, policy: policy), router: settings.events, clients: settings.clients,
            inbox: InboxWriter(client: client, logger: logger), rejections: RejectionWriter(client: client, logger: logger),
            metrics: metrics, logger: logger)
        let dependencies = ServerDependencies(receiver: receiver, keys: keys, queries: AccountQueries(client: client),
                                              registry: registry, metrics: metrics, maxBodyBytes: 65536)
        let appleKey = AppleClientSecretKey(teamID: "TEAM123456", keyID: "KEY1234567", privateKey: P256.Signing.PrivateKey())
        let directory = UserDirectory(client: client, logger: logger)
        let signIn = SignInService(
            verifier: IdentityTokenVerifier(keys: keys, policy: policy),
            apple: AppleAuthClient(httpClient: HTTPClient.shared, secrets: try ClientSecretProvider(key: appleKey)),
            keyRing: try TokenKeyRing(keys: [(id: "k1", bytes: Data(repeating: 7, count: 32))]),
            store: SignInStore(client: client, validationPeriodHours: 24, logger: logger),
            directory: directory, clients: settings.clients, logger: logger, metrics: metrics)
        let api = SignInDependencies(service: signIn, directory: directory, apiKeys: APIKeyVerifier(client: client, logger: logger),
                                     feed: AppEventFeed(client: client, retentionDays: 30, logger: logger))
        let admin = try #require(settings.admin)
        func list<Context>(_ router: Router<Context>) -> [(method: String, path: String)] {
            router.routes.map { ($0.method.rawValue, "\($0.path)") }
        }
        let metricsRouters = MetricsListener.routers(keys: keys, queries: AccountQueries(client: client), registry: registry,
                                                     logger: logger)
        return [
            "public": list(buildRouter(dependencies, logger: logger)),
            "metrics": list(metricsRouters.serve),
            "api": list(buildAPIRouter(api, maxBodyBytes: 65536, logger: logger)),
            "admin": list(buildAdminRouter(AdminDependencies(client: client, metrics: metrics, logger: logger), settings: admin,
                                           logger: logger)),
            "worker": list(metricsRouters.worker),
        ]
    }

    @Test func everyRouteIsInTheDocsAndNoOther() async throws {
        let routes = try await Self.routes()
        #expect(routes.contains("POST /apple/notifications") && routes.contains("POST /v1/sign-in")
                && routes.contains("GET /admin/users/{}/history"), "\(routes.sorted())")
        let pattern = #"\b(GET|POST|PUT|PATCH|DELETE|HEAD) (/[A-Za-z0-9_.{}:/-]*)"#
        func mentioned(_ text: String) throws -> [String] {
            try text.matches(of: Regex(pattern)).compactMap { match in
                guard let method = match.output[1].substring, let path = match.output[2].substring else { return nil }
                return Self.normalized(String(method), String(path))
            }
        }
        let documented = Set(try mentioned(try Self.docs()))
        for route in routes.sorted() {
            #expect(documented.contains(route), "`\(route)` is in no page of docs/ (docs/http-api.md)")
        }
        // A mention under one of siwa's own first path segments must be a
        // route; Apple's and the simulator's paths are not siwa's.
        let firsts = Set(routes.map { $0.split(separator: " ")[1].split(separator: "/", omittingEmptySubsequences: false)[1] })
        for (page, text) in try Self.docsAndReadme() {
            for mention in try mentioned(text) {
                let first = mention.split(separator: " ")[1].split(separator: "/", omittingEmptySubsequences: false)[1]
                if firsts.contains(first) {
                    #expect(routes.contains(mention), "\(page) names `\(mention)`, which no router registers")
                }
            }
        }
    }

    // MARK: Metrics

    /// The series siwa's sources register: swift-metrics' labels
    /// (`Counter(label:`, `Gauge(label:`, `Timer(label:`, `Recorder(label:`)
    /// and the scrape-time gauges' `MetricNameDescriptor`s.
    static func metricNames() throws -> Set<String> {
        let sources = root.appendingPathComponent("Sources")
        let tools = ["SIWABench", "SIWADemo", "AppleSimulator"]
        var names: Set<String> = []
        let files = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        for case let url as URL in files where url.pathExtension == "swift" {
            if tools.contains(where: { url.path.contains("/Sources/\($0)/") }) { continue }
            let source = try String(contentsOf: url, encoding: .utf8)
            for label in try matches(#"(?:Counter|Gauge|Timer|Recorder)\(\s*label:\s*"(siwa_[^"]*)""#, in: source) {
                if label.contains(#"\(outcome)"#) {
                    for outcome in JobMetrics.outcomes { names.insert(label.replacingOccurrences(of: #"\(outcome)"#, with: outcome)) }
                } else if label.contains(#"\("#) {
                    Issue.record("\(url.lastPathComponent): teach DocsTests the values of the metric label \(label)")
                } else {
                    names.insert(String(label))
                }
            }
            // The process's own gauges, under Prometheus's usual names (ProcessGauges).
            names.formUnion(try matches(#""(process_[a-z_]+)""#, in: source).map(String.init))
            for match in source.matches(of: /MetricNameDescriptor\(\s*namespace:\s*"siwa",\s*metricName:\s*"([a-z_]+)",\s*unitName:\s*"([a-z]*)"/) {
                names.insert("siwa_" + match.output.1 + (match.output.2.isEmpty ? "" : "_" + match.output.2))
            }
        }
        return names
    }

    @Test func everyMetricIsInTheDocsAndNoOther() throws {
        let names = try Self.metricNames()
        #expect(names.contains("process_open_fds") && names.contains("siwa_apple_request_duration_seconds")
                && names.contains("siwa_audit_chain_broken"), "\(names.sorted())")
        #expect(names.contains("siwa_notifications_total") && names.contains("siwa_jobs")
                && names.contains("siwa_worker_jobs_rescued_total") && names.contains("siwa_jobs_oldest_runnable_seconds"),
                "\(names.sorted())")
        let docs = try Self.docs()
        for name in names.sorted() {
            #expect(Self.names(name, in: docs), "the metric \(name) is in no page of docs/ (docs/operations.md, \"Metrics\")")
        }
        // siwa_ words that are not series: the database roles, the NOTIFY
        // channels, a column of the example purge plan.
        let notMetrics: Set<String> = ["siwa_serve", "siwa_worker", "siwa_purge", "siwa_admin", "siwa_auditor", "siwa_owner", "siwa_app",
                                       JobQueue.wakeChannel, APIKeyCache.channel, "siwa_user_id"]
        for (page, text) in try Self.docsAndReadme() {
            for token in try Self.matches(#"((?:siwa|process)_[a-z0-9_]*[a-z0-9])(?![a-z0-9_(])"#, in: text).map(String.init)
            where !notMetrics.contains(token) {
                #expect(names.contains(token), "\(page) names \(token), which is no metric siwa exports")
            }
        }
    }

    // MARK: Alerts

    static func alertNames() throws -> Set<String> {
        let directory = root.appendingPathComponent("deploy/prometheus")
        var names: Set<String> = []
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path)
        where file.hasSuffix(".yml") && !file.hasSuffix(".test.yml") {
            let rules = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            names.formUnion(try matches(#"-\s*alert:\s*([A-Za-z0-9_]+)"#, in: rules).map(String.init))
        }
        return names
    }

    @Test func everyAlertHasItsRunbookAndNoOther() throws {
        let alerts = try Self.alertNames()
        #expect(alerts.contains("SiwaPurgeDiscarded"), "\(alerts.sorted())")
        let operations = try Self.text("docs/operations.md")
        for alert in alerts.sorted() {
            #expect(operations.contains("\n### \(alert)\n"), "the alert \(alert) has no section `### \(alert)` in docs/operations.md")
        }
        for (page, text) in try Self.docsAndReadme() {
            for token in try Self.matches(#"\b(Siwa[A-Z][A-Za-z0-9]*)"#, in: text).map(String.init) {
                #expect(alerts.contains(token), "\(page) names \(token), which is no alert of deploy/prometheus")
            }
        }
    }

    /// Every rule's `runbook_url` is the anchor of its own section of
    /// docs/operations.md, under the placeholder base deploy/README.md
    /// tells the operator to replace.
    @Test func everyAlertsRunbookURLReachesItsSection() throws {
        let base = "https://siwa.example/docs/operations.md#"
        let anchors = Self.anchors(try Self.text("docs/operations.md"))
        let rules = try Self.text("deploy/prometheus/alerts.yml")
        let parts = rules.components(separatedBy: "- alert:").dropFirst()
        let alerts = try Self.alertNames()
        #expect(parts.count == alerts.count)
        for part in parts {
            let name = part.prefix { !$0.isNewline }.trimmingCharacters(in: .whitespaces)
            let urls = try Self.matches(#"runbook_url:\s*(\S+)"#, in: String(part)).map(String.init)
            #expect(urls == [base + name.lowercased()], "\(name): runbook_url \(urls), expected \(base + name.lowercased())")
            #expect(anchors.contains(name.lowercased()), "\(name): docs/operations.md has no heading whose anchor is #\(name.lowercased())")
        }
    }

    // MARK: Links

    /// GitHub's anchor of a heading: lower case, only letters, digits,
    /// `-`, `_` and spaces kept, spaces made `-`; a repeated one gets `-1`, `-2`.
    static func anchors(_ markdown: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var anchors: Set<String> = []
        var fenced = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") { fenced.toggle(); continue }
            guard !fenced, let hashes = line.firstIndex(where: { $0 != "#" }), hashes != line.startIndex,
                  line.distance(from: line.startIndex, to: hashes) <= 6, line[hashes] == " " else { continue }
            let slug = String(line[line.index(after: hashes)...].trimmingCharacters(in: .whitespaces).lowercased()
                .filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == " " })
                .replacingOccurrences(of: " ", with: "-")
            let count = seen[slug, default: 0]
            seen[slug] = count + 1
            anchors.insert(count == 0 ? slug : "\(slug)-\(count)")
        }
        return anchors
    }

    /// Relative links, outside code and outside quotations (a quoted page's
    /// links are relative to that page's site).
    @Test func everyRelativeLinkReachesItsFileAndHeading() throws {
        var files = ["README.md", "deploy/README.md"]
        files += try Self.docsPages().keys.sorted()
        for file in files {
            let base = Self.root.appendingPathComponent(file).deletingLastPathComponent()
            var fenced = false
            for (number, line) in try Self.text(file).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                if line.hasPrefix("```") { fenced.toggle(); continue }
                if fenced || line.hasPrefix(">") { continue }
                let prose = line.replacing(/`[^`]*`/, with: "")
                for match in prose.matches(of: /\]\(([^)\s]+)\)/) {
                    let target = String(match.output.1)
                    if target.firstMatch(of: /^[a-z][a-z0-9+.-]*:/) != nil { continue }
                    let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                    let path = String(parts[0]), anchor = parts.count > 1 ? String(parts[1]) : nil
                    let url = path.isEmpty ? Self.root.appendingPathComponent(file) : base.appendingPathComponent(path).standardizedFileURL
                    guard FileManager.default.fileExists(atPath: url.path) else {
                        Issue.record("\(file):\(number + 1): \(target): no such file")
                        continue
                    }
                    if let anchor, url.pathExtension == "md" {
                        let headings = Self.anchors(try String(contentsOf: url, encoding: .utf8))
                        #expect(headings.contains(anchor), "\(file):\(number + 1): \(target): no such heading")
                    }
                }
            }
        }
    }
}
