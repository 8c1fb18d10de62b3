import AccountStore
import AppleSignIn
import Foundation
import Logging
import PostgresNIO
import SIWAConfiguration
import SIWAServer

/// siwa's recording alone, without HTTP: the inbox writer `siwa serve`
/// runs (built from serve's own default settings: its lanes, batches and
/// connection pool), in this process, fed by as many tasks as wrk has
/// connections with the entries serve would make of a round's
/// notifications. This process's CPU per notification is what recording
/// costs siwa by itself. What siwa spends beyond its floors and this is
/// the HTTP request's wait for its batch: the task switches around it, and
/// the threads' sleeps and wake-ups while the database works, which grow
/// per notification as the database's pace slows.
enum RecordingAlone {
    static func cpuPerNotification(bodies: [Data], verifier: NotificationVerifier, databaseURL: String, clientID: String,
                                   concurrency: Int, tag: String, logger: Logger) async throws -> Double {
        let settings = try ServerSettings(environment: SettingsReader([
            "SIWA_DATABASE_URL": databaseURL, "SIWA_APPLE_TEAM_ID": SignInCredentials.teamID, "SIWA_APPLE_CLIENT_IDS": clientID,
        ]))
        // New jtis (the round recorded these already), about the same users.
        var entries: [InboxEntry] = []
        for body in bodies {
            var entry = settings.events.entry(for: try await verifier.verify(try IngestBodies.token(of: body)), team: SignInCredentials.teamID)
            entry.jti = "\(tag)-\(entry.jti)"
            entries.append(entry)
        }
        let client = PostgresClient(configuration: try settings.database.configuration().postgresClientConfiguration,
                                    backgroundLogger: logger)
        let inbox = InboxWriter(client: client, options: settings.inbox, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { services in
            services.addTask { await client.run() }
            services.addTask { await inbox.run() }
            defer {
                inbox.close()
                services.cancelAll()
            }
            // Connections open, statements prepared: as after serve's warm-up.
            _ = try await inbox.record(entries[0])
            let before = processCPUSeconds(getpid())
            try await withThrowingTaskGroup(of: Void.self) { senders in
                // Sender k takes entries k+1, k+1+concurrency, ... (the first is recorded).
                for sender in 0..<concurrency {
                    senders.addTask { [entries] in
                        for index in stride(from: sender + 1, to: entries.count, by: concurrency) {
                            _ = try await inbox.record(entries[index])
                        }
                    }
                }
                try await senders.waitForAll()
            }
            return (processCPUSeconds(getpid()) - before) / Double(entries.count - 1) * 1e6
        }
    }

}
