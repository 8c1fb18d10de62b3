import Foundation

/// The sign-in part's figures, with the targets they are held to.
enum SignInSummary {
    static func print(_ report: SignInBench.Report, options: SignInBench.Options) {
        let ratio = median(report.cpuRatios)
        say("")
        say("== siwa sign-in benchmark (release build, `siwa serve` and `siwa worker` as the runtime role, JSON logs at info, \(ProcessInfo.processInfo.activeProcessorCount) cores; medians over \(options.rounds) rounds)")
        say("(the Apple simulator runs in siwa-bench's process, not in siwa's: its CPU, an RS256 id_token signed per /auth/token call, is not counted in siwa's, but it shares the cores)")
        say(String(format: "sign-ins, new users          %.0f/s   p50 %.1f ms   p99 %.1f ms   (%d connections; rounds: %@; %d failed; %d tokens stored of %d sign-ins)",
                   median(report.signInRates), median(report.p50), median(report.p99), options.concurrency,
                   report.signInRates.map { String(format: "%.0f", $0) }.joined(separator: ", "), report.failed,
                   report.tokensStored, report.signInsSent))
        say(String(format: "siwa CPU per sign-in         %.0f µs   (rounds: %@; the simulator's, not counted: %.0f µs)", median(report.signInCPU),
                   report.signInCPU.map { String(format: "%.0f", $0) }.joined(separator: ", "), median(report.simulatorCPU)))
        say(String(format: "siwa CPU per notification    %.0f µs   (same process, same rounds: %@; %.0f/s; %d of %d recorded)",
                   median(report.notificationCPU), report.notificationCPU.map { String(format: "%.0f", $0) }.joined(separator: ", "),
                   median(report.notificationRates), report.notificationsRecorded, report.notificationsSent))
        say(String(format: "ratio sign-in / notification %.2f   (target: a sign-in costs at most 3x a notification's CPU: %@; rounds: %@)",
                   ratio, ratio <= 3 ? "PASS" : "FAIL", report.cpuRatios.map { String(format: "%.2f", $0) }.joined(separator: ", ")))
        let validation = report.validation
        say(String(format: "token validation, cap off    %.0f/s   (%d tokens due at once, first to last validation; rounds: %@; worker %.0f µs CPU each)",
                   median(validation.rates), validation.tokens, validation.rates.map { String(format: "%.0f", $0) }.joined(separator: ", "),
                   median(validation.workerCPU)))
        let capHeld = validation.busiestWindow <= validation.cap + 1
        say(String(format: "token validation, cap on     busiest 1 s window %d requests, cap %d/s: %@   (%.1f/s over the run; %d of %d validated; windows between samples 10 ms apart, +1 allowed for a window edge)",
                   validation.busiestWindow, validation.cap, capHeld ? "PASS" : "FAIL", validation.capRate, validation.capValidated,
                   validation.capTokens))
        say(validation.slowestStop.map { String(format: "siwa worker stopped on SIGTERM within %.1f s", $0.seconds) }
            ?? "siwa worker did not exit within 5 s of SIGTERM (killed): an idle TokenValidator sleeps out its 30 s poll, which graceful shutdown does not interrupt")
    }
}
