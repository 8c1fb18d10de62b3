import AccountStore
import AppleSimulator
import AsyncHTTPClient
import Foundation
import Logging
import PostgresNIO

/// The sign-in part of `make bench`, on a database of its own, against the
/// Apple simulator on loopback (in this process: its CPU is not siwa's):
/// - the release `siwa serve` with sign-in settings, as the runtime role,
///   driven by wrk: new users' `POST /v1/sign-in` (identity token and a
///   fresh authorization code each, made before the clock starts), then
///   Apple's notifications about them, each at the same concurrency; siwa's
///   CPU per sign-in and per notification from /proc, in the same process;
/// - then `siwa worker` validating the tokens those sign-ins stored
///   (TokenValidationBench).
enum SignInBench {
    struct Options {
        var rounds: Int
        var perRound: Int
        var notificationsPerRound: Int
        var warmUp: Int
        var concurrency: Int
        var validations: Int
        var cap: Int
        var capSeconds: Int
    }

    struct Report {
        var signInRates: [Double] = []
        var p50: [Double] = []
        var p99: [Double] = []
        var failed = 0
        /// µs of siwa serve's CPU per sign-in and per notification.
        var signInCPU: [Double] = []
        var notificationCPU: [Double] = []
        var notificationRates: [Double] = []
        /// µs of this process's CPU (the simulator's token endpoint, mostly) per sign-in.
        var simulatorCPU: [Double] = []
        var signInsSent = 0
        var tokensStored = 0
        var notificationsSent = 0
        var notificationsRecorded = 0
        var validation = TokenValidationBench.Report()

        var cpuRatios: [Double] { zip(signInCPU, notificationCPU).map { $0 / $1 } }
    }

    static let clientID = "com.example.siwa.bench"

    static func run(serverURL: String, options: Options, http: HTTPClient, logger: Logger) async throws -> Report {
        let apple = try AppleSimulator()
        let appleServer = try await apple.start(logger: logger)
        let credentials: SimulatedTeamKeyFiles
        let database: BenchDatabase
        do {
            credentials = try SignInCredentials.files(registeringWith: apple)
            database = try await BenchDatabase.create(serverURL: serverURL, label: "signin")
        } catch {
            await appleServer.stop()
            throw error
        }
        let settings = credentials.settings(appleBaseURL: appleServer.baseURL)
        do {
            let owner = try DatabaseConfiguration(url: database.ownerURL, maximumConnections: 2)
            let report = try await owner.withClient { client in
                try await measure(database: database, client: client, apple: apple, settings: settings,
                                  jwksURL: appleServer.baseURL + "/auth/keys", options: options, http: http, logger: logger)
            }
            await database.drop()
            await appleServer.stop()
            credentials.remove()
            return report
        } catch {
            await database.drop()
            await appleServer.stop()
            credentials.remove()
            throw error
        }
    }

    private static func measure(database: BenchDatabase, client: PostgresClient, apple: AppleSimulator, settings: [String: String],
                                jwksURL: String, options: Options, http: HTTPClient, logger: Logger) async throws -> Report {
        let key = try await SignInCredentials.apiKey(client, logger: logger)
        say("signin: signing identity tokens, issuing codes and signing notifications (not timed)…")
        let bodies = try await SignInBodies.sign(apple: apple, clientID: clientID, warmUp: options.warmUp, rounds: options.rounds,
                                                 perRound: options.perRound, notificationsPerRound: options.notificationsPerRound)
        say("signin: warm-up of \(options.warmUp) each, then \(options.rounds) rounds of \(options.perRound) new users' sign-ins "
            + "and \(options.notificationsPerRound) notifications about them, \(options.concurrency) connections (wrk)")
        var report = Report()
        let siwa = try await ServeProcess.start(databaseURL: database.serveURL, clientID: clientID, jwksURL: jwksURL, http: http,
                                                settings: settings)
        do {
            try await drive(siwa, bodies: bodies, authorization: "Bearer \(key)", concurrency: options.concurrency, report: &report)
            await siwa.stop()
        } catch {
            await siwa.stop()
            throw error
        }
        // Every sign-in answered stored its token; every notification is recorded once.
        report.tokensStored = try await TokenValidationBench.count(client, "SELECT count(*) FROM siwa.apple_tokens", logger: logger)
        report.notificationsRecorded = try await TokenValidationBench.count(
            client, "SELECT count(*) FROM siwa.notifications WHERE jti LIKE 'bench-signin-%'", logger: logger)

        say("")
        say("signin: the worker validates \(min(options.validations, report.tokensStored)) of the stored tokens, "
            + "\(options.rounds) rounds with the cap off, then \(options.capSeconds) s with the cap at \(options.cap)/s")
        report.validation = try await TokenValidationBench.run(
            database: database, client: client, apple: apple, settings: settings, rounds: options.rounds, tokens: options.validations,
            cap: options.cap, capSeconds: options.capSeconds, logger: logger)
        return report
    }

    private static func drive(_ siwa: ServeProcess, bodies: SignInBodies, authorization: String, concurrency: Int,
                              report: inout Report) async throws {
        let signInURL = siwa.apiURL + "/v1/sign-in"
        let notificationURL = siwa.url + "/apple/notifications"
        let files = BodyFiles()
        defer { files.removeAll() }
        // Warm up connections (to the database and to Apple), prepared
        // statements, Apple's keys and the client secret.
        let warmUp = try await Wrk.run(url: signInURL, bodiesFile: try files.write(bodies.warmUp), count: bodies.warmUp.count,
                                       connections: concurrency, authorization: authorization)
        _ = try await Wrk.run(url: notificationURL, bodiesFile: try files.write(bodies.warmUpNotifications),
                              count: bodies.warmUpNotifications.count, connections: concurrency)
        report.signInsSent += bodies.warmUp.count
        report.notificationsSent += bodies.warmUpNotifications.count
        // A sign-in the bench sends wrongly fails fast and would be timed as
        // a (very fast) sign-in: stop here instead, saying so.
        guard warmUp.failed == 0 else {
            throw BenchError("\(warmUp.failed) of the \(bodies.warmUp.count) warm-up sign-ins were refused: the bench's bodies do not match what siwa serve expects")
        }

        for (round, signIns) in bodies.rounds.enumerated() {
            let notifications = bodies.notificationRounds[round]
            let (signInFile, notificationFile) = (try files.write(signIns), try files.write(notifications))
            let (siwaBefore, ownBefore) = (siwa.cpuSeconds, processCPUSeconds(getpid()))
            let signIn = try await Wrk.run(url: signInURL, bodiesFile: signInFile, count: signIns.count, connections: concurrency,
                                           authorization: authorization)
            let (siwaBetween, ownBetween) = (siwa.cpuSeconds, processCPUSeconds(getpid()))
            let notification = try await Wrk.run(url: notificationURL, bodiesFile: notificationFile, count: notifications.count,
                                                 connections: concurrency)
            let siwaAfter = siwa.cpuSeconds
            report.signInsSent += signIns.count
            report.notificationsSent += notifications.count
            report.failed += signIn.failed
            report.signInRates.append(signIn.rate)
            report.p50.append(signIn.p50)
            report.p99.append(signIn.p99)
            report.signInCPU.append((siwaBetween - siwaBefore) / Double(signIns.count) * 1e6)
            report.simulatorCPU.append((ownBetween - ownBefore) / Double(signIns.count) * 1e6)
            report.notificationCPU.append((siwaAfter - siwaBetween) / Double(notifications.count) * 1e6)
            report.notificationRates.append(notification.rate)
            say(String(format: "signin round %d: %.0f sign-ins/s (p50 %.1f ms, p99 %.1f ms, %d failed, siwa %.0f µs CPU each, simulator %.0f µs) | notifications %.0f/s (p50 %.1f ms, %d failed, %.0f µs CPU each) | CPU ratio %.2f",
                       round + 1, signIn.rate, signIn.p50, signIn.p99, signIn.failed, report.signInCPU[round], report.simulatorCPU[round],
                       notification.rate, notification.p50, notification.failed, report.notificationCPU[round], report.cpuRatios[round]))
        }
    }
}
