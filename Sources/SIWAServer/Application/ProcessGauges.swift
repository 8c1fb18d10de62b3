#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Prometheus
import Synchronization

/// The process's own CPU, memory and descriptors, under the names
/// Prometheus's client libraries use (`process_cpu_seconds_total`,
/// `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
/// `process_open_fds`, `process_max_fds`, `process_start_time_seconds`),
/// so that the usual dashboards read them. Read from `/proc/self` at
/// scrape time, by hand: neither swift-metrics 2.13, swift-prometheus nor
/// swift-otel has a process collector, and the package that had one
/// (swift-metrics-extras' SystemMetrics) is not among the packages siwa
/// may depend on. Linux only; elsewhere nothing is exported.
enum ProcessGauges {
    struct Reading: Equatable {
        var cpuSeconds: Double
        var residentBytes: Double
        var virtualBytes: Double
        var startTimeSeconds: Double
    }

    static func update(_ registry: PrometheusCollectorRegistry) {
        #if os(Linux)
        if let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
           let reading = parse(stat: stat, bootTime: bootTime, ticksPerSecond: Double(sysconf(Int32(_SC_CLK_TCK))),
                               pageSize: Double(sysconf(Int32(_SC_PAGESIZE)))) {
            advanceCPUCounter(of: registry, to: reading.cpuSeconds)
            gauge(registry, "process_resident_memory_bytes", "Resident memory size in bytes").set(reading.residentBytes)
            gauge(registry, "process_virtual_memory_bytes", "Virtual memory size in bytes").set(reading.virtualBytes)
            gauge(registry, "process_start_time_seconds", "Start time of the process since unix epoch in seconds").set(reading.startTimeSeconds)
        }
        if let open = openDescriptors() {
            gauge(registry, "process_open_fds", "Number of open file descriptors").set(Double(open))
        }
        if let limits = try? String(contentsOfFile: "/proc/self/limits", encoding: .utf8), let limit = maxOpenFiles(limits: limits) {
            gauge(registry, "process_max_fds", "Maximum number of open file descriptors").set(limit)
        }
        #endif
    }

    /// What each registry's `process_cpu_seconds_total` has counted so far.
    /// The registry is held so that its identifier is never reused (there
    /// is one per process, a few in the tests).
    private static let countedCPU = Mutex([ObjectIdentifier: (registry: PrometheusCollectorRegistry, seconds: Double)]())

    /// `process_cpu_seconds_total` is a counter, as Prometheus's client
    /// libraries type it (so `rate()` reads it as one): /proc gives the
    /// total, a counter can only be incremented, so each scrape adds what
    /// was spent since the last one. Under the lock, so that two scrapes at
    /// once (or two listeners on one registry) do not both add it.
    private static func advanceCPUCounter(of registry: PrometheusCollectorRegistry, to total: Double) {
        let counter = registry.makeCounter(descriptor: MetricNameDescriptor(
            metricName: "process_cpu_seconds_total", unitName: "", helpText: "Total user and system CPU time spent in seconds"))
        countedCPU.withLock { counted in
            let key = ObjectIdentifier(registry)
            let already = counted[key]?.seconds ?? 0
            guard total > already else { return }
            counter.increment(by: total - already)
            counted[key] = (registry, total)
        }
    }

    private static func gauge(_ registry: PrometheusCollectorRegistry, _ name: String, _ help: String) -> Gauge {
        registry.makeGauge(descriptor: MetricNameDescriptor(metricName: name, unitName: "", helpText: help))
    }

    /// `/proc/self/stat` (proc(5)): the fields after the command's closing
    /// parenthesis (the command may hold spaces and parentheses itself),
    /// from field 3 on: utime is field 14, stime 15, starttime 22 (clock
    /// ticks since boot), vsize 23 (bytes), rss 24 (pages).
    static func parse(stat: String, bootTime: Double?, ticksPerSecond: Double, pageSize: Double) -> Reading? {
        guard let close = stat.lastIndex(of: ")"), ticksPerSecond > 0 else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        func field(_ number: Int) -> Double? {
            let index = number - 3
            return index < fields.count ? Double(fields[index]) : nil
        }
        guard let utime = field(14), let stime = field(15), let start = field(22), let vsize = field(23), let rss = field(24) else {
            return nil
        }
        return Reading(cpuSeconds: (utime + stime) / ticksPerSecond, residentBytes: rss * pageSize, virtualBytes: vsize,
                       startTimeSeconds: (bootTime ?? 0) + start / ticksPerSecond)
    }

    /// The boot time (`btime` in `/proc/stat`), read once.
    static let bootTime: Double? = {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        for line in stat.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst("btime ".count))
        }
        return nil
    }()

    /// The entries of `/proc/self/fd`, less the one the listing itself holds open.
    static func openDescriptors() -> Int? {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return nil }
        return max(entries.count - 1, 0)
    }

    /// The soft limit of `Max open files` in `/proc/self/limits` (read there
    /// rather than with getrlimit, whose resource type Swift imports
    /// differently from one C library to the next).
    static func maxOpenFiles(limits: String) -> Double? {
        for line in limits.split(separator: "\n") where line.hasPrefix("Max open files") {
            return line.dropFirst("Max open files".count).split(separator: " ").first.flatMap { Double($0) }
        }
        return nil
    }
}
