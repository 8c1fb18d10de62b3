import Foundation

/// What PostgreSQL spent between two readings: CPU seconds of the whole
/// server (the postmaster, every backend and background process, and the
/// children it has reaped since: a connection that closed between the
/// readings still counts) and WAL bytes written. The bench runs on the
/// database's machine, so /proc has the server's processes.
struct PostgresCost {
    let cpuSeconds: Double
    let walBytes: Double

    /// A reading now, through `database`'s owner connection (psql): the
    /// server's process tree from /proc and `pg_current_wal_lsn()`.
    static func read(_ database: BenchDatabase) async throws -> Reading {
        // A background process (no user: the checkpointer, the WAL writer,
        // ...) lives as long as the server, and its parent is the
        // postmaster; psql's own backend is gone by the time /proc is read.
        // (A role that is not a superuser sees other rows' pids, not their
        // backend_type.)
        let answer = try await database.scalar("""
            SELECT (SELECT min(pid) FROM pg_stat_activity WHERE usename IS NULL AND pid <> pg_backend_pid())
                   || ' ' || (pg_current_wal_lsn() - '0/0'::pg_lsn)
            """)
        let parts = answer.split(separator: " ")
        guard parts.count == 2, let background = pid_t(parts[0]), let wal = Double(parts[1]) else {
            throw BenchError("cannot read a PostgreSQL background process's pid and the WAL position: \(answer)")
        }
        guard let postmaster = ProcessStat(pid: background)?.parent, let server = ProcessStat(pid: postmaster) else {
            throw BenchError("cannot read PostgreSQL's processes in /proc (is the server on this machine?)")
        }
        var cpu = server.ownSeconds + server.reapedChildrenSeconds
        for child in ProcessStat.children(of: postmaster) { cpu += child.ownSeconds }
        return Reading(cpuSeconds: cpu, walBytes: wal)
    }

    struct Reading {
        let cpuSeconds: Double
        let walBytes: Double

        /// The cost from `self` to `later`, per unit of work.
        func cost(to later: Reading, per units: Int) -> PostgresCost {
            let units = Double(max(units, 1))
            return PostgresCost(cpuSeconds: (later.cpuSeconds - cpuSeconds) / units, walBytes: (later.walBytes - walBytes) / units)
        }
    }
}

/// The fields of /proc/PID/stat the cost needs.
struct ProcessStat {
    let pid: pid_t
    let parent: pid_t
    /// utime + stime, in seconds.
    let ownSeconds: Double
    /// cutime + cstime: children waited for, in seconds.
    let reapedChildrenSeconds: Double

    init?(pid: pid_t) {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let afterName = stat.lastIndex(of: ")") else { return nil }
        // After "(comm)": state (field 3), ppid (4), ..., utime (14), stime (15), cutime (16), cstime (17).
        let fields = stat[stat.index(after: afterName)...].split(separator: " ")
        guard fields.count > 14, let parent = pid_t(fields[1]), let user = Double(fields[11]), let system = Double(fields[12]),
              let childUser = Double(fields[13]), let childSystem = Double(fields[14]) else { return nil }
        let tick = Double(sysconf(Int32(_SC_CLK_TCK)))
        self.pid = pid
        self.parent = parent
        ownSeconds = (user + system) / tick
        reapedChildrenSeconds = (childUser + childSystem) / tick
    }

    /// The live processes whose parent is `pid`.
    static func children(of pid: pid_t) -> [ProcessStat] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { pid_t($0) }.compactMap { ProcessStat(pid: $0) }.filter { $0.parent == pid }
    }
}
