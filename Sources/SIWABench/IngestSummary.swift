import Foundation

/// The ingest figures of every scenario, with the targets they are held to.
enum IngestSummary {
    /// Issue 20's target for siwa's own CPU per notification.
    static let cpuTarget = 75.0

    static func print(_ reports: [IngestReport], concurrency: Int, offeredRate: Int) {
        say("")
        say("== siwa ingest benchmark (release build, `siwa serve` as the runtime role, default settings, JSON logs at info, \(ProcessInfo.processInfo.activeProcessorCount) cores, \(concurrency) connections from wrk; medians over rounds)")
        say("scenario   committed/s   pgbench ceiling   ratio (target >= 1.0)   p50 / p99 closed   CPU each   bare HTTP   open loop \(offeredRate)/s p50 / p99 (target <= 10 ms)   bare HTTP's   recorded")
        for report in reports {
            let open = report.open
            say(String(format: "%-9@  %11.0f   %15.0f   %5.2f (%@)   %5.1f / %5.1f ms   %5.0f µs   %8.0f/s   %6.1f / %5.1f ms, %d failed   %4.1f / %4.1f ms   %@ of %d",
                       report.scenario.label, median(report.siwaRates), median(report.pgbenchRates), median(report.ratios),
                       report.ratios.map { String(format: "%.2f", $0) }.joined(separator: " "),
                       median(report.p50), median(report.p99), median(report.cpu), median(report.bareRates),
                       open?.percentile(0.5) ?? .nan, open?.percentile(0.99) ?? .nan, open?.failed ?? -1,
                       report.openFloor?.percentile(0.5) ?? .nan, report.openFloor?.percentile(0.99) ?? .nan, report.recorded, report.sent))
        }
        say("")
        say("== per notification, siwa against the plain five-statement version on the same database (PlainVersion, pgbench, \(PlainVersion.notificationClients) clients)")
        say("scenario   siwa/s   plain/s   siwa / plain (target >= 1.0)   siwa CPU (bare HTTP's)   PostgreSQL CPU: siwa / plain   WAL bytes: siwa / plain")
        for report in reports where !report.plainRates.isEmpty {
            say(String(format: "%-9@  %6.0f   %7.0f   %5.2f (%@)   %5.0f µs (%3.0f µs)      %5.0f / %5.0f µs   %6.0f / %6.0f B",
                       report.scenario.label, median(report.siwaRates), median(report.plainRates), median(report.plainRatios),
                       report.plainRatios.map { String(format: "%.2f", $0) }.joined(separator: " "), median(report.cpu), median(report.bareCPU),
                       median(report.postgresCPU), median(report.plainPostgresCPU), median(report.wal), median(report.plainWAL)))
        }
        say("")
        say("== siwa's CPU per notification against its floors, measured in this run: a bare route that reads the body and answers 200 (on Hummingbird, siwa's HTTP stack, and on SwiftNIO's HTTP/1 handlers alone) plus the verification of one notification alone (parse, claims, RSA); and serve's inbox writer alone, without HTTP, fed by \(concurrency) tasks")
        say("scenario   siwa CPU (target <= \(Int(cpuTarget)) µs)   Hummingbird floor: route + verification   SwiftNIO floor: route + verification   recording alone   siwa beyond the Hummingbird floor and recording alone")
        for report in reports where !report.verificationCPU.isEmpty {
            let siwa = median(report.cpu), verification = median(report.verificationCPU), recording = median(report.recordingCPU)
            let hummingbird = median(report.bareCPU) + verification, nio = median(report.bareNIOCPU) + verification
            say(String(format: "%-9@  %5.0f µs (%@)              %4.0f + %3.0f = %4.0f µs                   %4.0f + %3.0f = %4.0f µs               %4.0f µs           %4.0f µs",
                       report.scenario.label, siwa, siwa <= cpuTarget ? "PASS" : "FAIL", median(report.bareCPU), verification, hummingbird,
                       median(report.bareNIOCPU), verification, nio, recording, siwa - hummingbird - recording))
        }
        if reports.contains(where: { $0.chain != nil }) {
            say("")
            say("== audit chain (sealed by one `siwa worker` while the load ran; its CPU over the scenario per row; `siwa audit verify` over the whole log)")
        }
        for report in reports {
            guard let chain = report.chain else { continue }
            say(String(format: "%-9@  %d rows   all sealed %.1f s after the load   worker %.1f µs CPU per row   verify %.2f s (%.0f rows/s): %@",
                       report.scenario.label, chain.rows, chain.catchUpSeconds, chain.workerMicrosPerRow, chain.verifySeconds,
                       Double(chain.rows) / max(chain.verifySeconds, 1e-9), chain.verifyLine))
        }
        for report in reports where !report.emailLookupMS.isEmpty {
            say("")
            say(String(format: "== the admin's lookup by email address on the %@ database (%d users, no index: a scan): median %.0f ms (%@)",
                       report.scenario.label, report.scenario.preloadUsers, median(report.emailLookupMS),
                       report.emailLookupMS.map { String(format: "%.0f", $0) }.joined(separator: " ")))
        }
        for report in reports {
            guard let flood = report.flood else { continue }
            say("")
            say("== junk flood on the \(report.scenario.label) database: wrk at full rate (\(concurrency) connections) with a bad-signature token, while Apple's \(offeredRate)/s arrive")
            say(String(format: "junk answered               %.0f/s   (%d in %.1f s; %d not 400, %d of them 5xx)", flood.junk.rate,
                       flood.junk.requests, flood.junk.seconds, flood.junk.otherThan400, flood.junk.serverErrors))
            say(String(format: "genuine under the flood     p50 %.1f ms   p99 %.1f ms   failed %d (non-200, 503 included)   (targets: p99 <= 25 ms, 0 failed)",
                       flood.open.percentile(0.5), flood.open.percentile(0.99), flood.open.failed))
            say("junk stored one by one      \(flood.rejectionRows) rows   (the rest counted: siwa_rejections_unrecorded_total \(flood.unrecorded))")
        }
    }
}
