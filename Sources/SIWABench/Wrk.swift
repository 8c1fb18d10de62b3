import ChildProcesses
import Foundation

/// Closed-loop HTTP load from wrk, the way pgbench drives the ceiling: a lean
/// C client on the same two cores. An in-process Swift client would spend a
/// fifth of the machine on itself and count it against siwa.
///
/// Each body in the file (one per line) is sent once. The connections of a
/// wrk thread take the thread's share of the lines in turn; the thread stops
/// once its whole share is answered, and the run ends (its clock too) when
/// the last thread stops.
enum Wrk {
    struct Result {
        var completed: Int
        var failed: Int
        var seconds: Double
        var p50: Double  // milliseconds
        var p99: Double
        var rate: Double { Double(completed) / seconds }
    }

    static let threads = 2

    /// Sends each of the `count` lines of `bodiesFile` to `url` as a JSON
    /// POST over `connections` connections; the rate counts those `count`.
    /// `authorization`: the Authorization header's value for every request.
    static func run(url: String, bodiesFile: String, count: Int, connections: Int, authorization: String = "") async throws -> Result {
        guard count >= threads else { throw BenchError("wrk needs at least \(threads) bodies, one per thread") }
        // The run ends when the last answer is in; -d only bounds a run
        // whose server stopped answering.
        let limit = max(120, count / 100)
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-wrk-\(UUID().uuidString)")
        let doneDirectory = work.appendingPathComponent("done")
        try FileManager.default.createDirectory(at: doneDirectory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let script = work.appendingPathComponent("bench.lua")
        try luaScript.write(to: script, atomically: true, encoding: .utf8)
        let (output, started, finished) = try await runWatched(["-t", String(threads), "-c", String(connections), "-d", "\(limit)s", "--timeout", "30s",
                                                   "-s", script.path, url, "--", bodiesFile, String(threads), doneDirectory.path,
                                                   authorization], doneDirectory: doneDirectory.path)
        // The script's done() prints one line of key=value pairs.
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("SIWA-WRK ") }) else {
            throw BenchError("wrk printed no result:\n\(output)")
        }
        var fields: [String: Double] = [:]
        for pair in line.dropFirst(9).split(separator: " ") {
            let parts = pair.split(separator: "=")
            if parts.count == 2, let value = Double(parts[1]) { fields[String(parts[0])] = value }
        }
        // Woken late: the clock stops at the last marker instead.
        let late = finished.map { max(0, started.addingTimeInterval((fields["duration_us"] ?? 0) / 1e6).timeIntervalSince($0)) } ?? 0
        guard let reported = fields["duration_us"], case let duration = reported - late * 1e6, duration > 0,
              let failed = fields["failed"], let p50 = fields["p50_us"], let p99 = fields["p99_us"] else {
            throw BenchError("cannot read wrk's result: \(line)")
        }
        guard let answered = fields["answered"], Int(answered) == count else {
            throw BenchError("wrk stopped after \(limit) s with \(fields["answered"].map { Int($0) } ?? 0) of \(count) answers: \(line)")
        }
        // Every answer in, but the run went on to -d: a thread never saw
        // its share answered, and the clock counted the wait.
        guard duration / 1e6 < Double(limit) - 1 else {
            throw BenchError("wrk ran to its \(limit) s limit though all \(count) were answered (answers/share per thread): \(line)")
        }
        return Result(completed: count - Int(failed), failed: Int(failed), seconds: duration / 1e6, p50: p50 / 1000, p99: p99 / 1000)
    }

    /// wrk, watched: now and then the SIGINT the last thread sends does
    /// not wake wrk's main thread (seen on a loaded machine, about one run
    /// in ten), which then sleeps out -d while the clock runs. Once every
    /// thread's marker is there and wrk still runs 100 ms later, SIGINT is
    /// sent again (every 100 ms). Returns wrk's output, when it was
    /// started, and when it had to be woken the last marker's time.
    static func runWatched(_ arguments: [String], doneDirectory: String) async throws -> (String, Date, Date?) {
        let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-bench-\(UUID().uuidString).out").path
        defer { try? FileManager.default.removeItem(atPath: outputFile) }
        let started = Date()
        let wrk = try ChildProcess(executable: "wrk", arguments: arguments, environment: ProcessInfo.processInfo.environment,
                                   outputFile: outputFile)
        var woken: (finished: Date, at: Date)?
        while wrk.isRunning {
            try? await Task.sleep(for: .milliseconds(20))
            guard let finished = lastMarker(doneDirectory), Date().timeIntervalSince(finished) > 0.1,
                  woken.map({ Date().timeIntervalSince($0.at) > 0.1 }) ?? true, wrk.isRunning else { continue }
            wrk.signal(SIGINT)
            woken = (finished, Date())
        }
        let text = (try? String(contentsOfFile: outputFile, encoding: .utf8)) ?? ""
        guard wrk.status == 0 else { throw BenchError("wrk failed (status \(wrk.status ?? -1)):\n\(text)") }
        return (text, started, woken?.finished)
    }

    /// When the last thread's marker was made, once every thread has one.
    static func lastMarker(_ doneDirectory: String) -> Date? {
        let markers = (0..<threads).map { try? FileManager.default.attributesOfItem(atPath: "\(doneDirectory)/\($0)")[.modificationDate] as? Date }
        guard markers.allSatisfy({ $0 != nil }) else { return nil }
        return markers.compactMap { $0 }.max()
    }

    struct FloodResult {
        var requests: Int
        var seconds: Double
        var serverErrors: Int  // 5xx answers
        var otherThan400: Int
        var rate: Double { Double(requests) / seconds }
    }

    /// The same body (line 1 of `bodyFile`) as fast as wrk can send it, for
    /// `seconds`: a flood of junk. Counts the answers that are not 400.
    static func flood(url: String, bodyFile: String, seconds: Int, connections: Int) async throws -> FloodResult {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-wrk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let script = work.appendingPathComponent("flood.lua")
        try floodScript.write(to: script, atomically: true, encoding: .utf8)
        let output = try await Shell.run("wrk", ["-t", String(threads), "-c", String(connections), "-d", "\(seconds)s", "--timeout", "10s",
                                                 "-s", script.path, url, "--", bodyFile])
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("SIWA-FLOOD ") }) else {
            throw BenchError("wrk printed no result:\n\(output)")
        }
        var fields: [String: Double] = [:]
        for pair in line.dropFirst(11).split(separator: " ") {
            let parts = pair.split(separator: "=")
            if parts.count == 2, let value = Double(parts[1]) { fields[String(parts[0])] = value }
        }
        guard let requests = fields["requests"], let duration = fields["duration_us"], duration > 0,
              let fives = fields["fives"], let other = fields["other"] else { throw BenchError("cannot read wrk's result: \(line)") }
        return FloodResult(requests: Int(requests), seconds: duration / 1e6, serverErrors: Int(fives), otherThan400: Int(other))
    }

    static let floodScript = #"""
        local threads = {}
        function setup(thread) table.insert(threads, thread) end
        fives, other = 0, 0
        function init(args)
            local file = io.open(args[1], "r")
            local body = file:read("*l")
            file:close()
            wrk.method = "POST"
            wrk.body = body
            wrk.headers["Content-Type"] = "application/json"
        end
        function response(status, headers, body)
            if status >= 500 then fives = fives + 1 end
            if status ~= 400 then other = other + 1 end
        end
        function done(summary, latency, requests)
            local f, o = 0, 0
            for _, thread in ipairs(threads) do f = f + thread:get("fives"); o = o + thread:get("other") end
            io.write(string.format("SIWA-FLOOD requests=%d duration_us=%d fives=%d other=%d\n",
                summary.requests, summary.duration, f, o))
        end
        """#

    /// Runs in each wrk thread (LuaJIT). `id` is set per thread in setup().
    ///
    /// wrk 4.1 has no "send N requests" mode and its main thread sleeps for
    /// the whole `-d`, so a thread that has its answers stops itself, and
    /// the last one to finish interrupts wrk (SIGINT, which wrk takes as
    /// "stop and report"). A thread knows the others are done by their
    /// marker files in `doneDirectory`.
    static let luaScript = #"""
        local threads = {}
        function setup(thread)
            thread:set("id", #threads)
            table.insert(threads, thread)
        end

        local requests = {}
        local sent = 0
        answered, idleAnswers, share = 0, 0, 0  -- globals: done() reads them with thread:get
        local threadCount, doneDirectory
        function init(args)
            local file = args[1]
            threadCount, doneDirectory = tonumber(args[2]), args[3]
            local headers = { ["Content-Type"] = "application/json" }
            if args[4] and args[4] ~= "" then headers["Authorization"] = args[4] end
            local line = 0
            for body in io.lines(file) do
                if line % threadCount == id then
                    requests[#requests + 1] = wrk.format("POST", nil, headers, body)
                end
                line = line + 1
            end
            share = #requests
        end

        -- Past its share a connection waits a second and then asks for a
        -- path neither server has (404, no work). The run normally ends
        -- within that second, so no body is sent twice, none is abandoned,
        -- and no idle answer lands in the latency figures.
        local idle = wrk.format("GET", "/wrk-idle")
        function delay()
            if sent >= #requests then return 1000 end
            return 0
        end

        -- wrk calls request() once on the first thread before the run, to
        -- check what it returns; that call must not use up a body.
        local checked = false
        function request()
            if id == 0 and not checked then checked = true; return requests[1] end
            sent = sent + 1
            if sent > #requests then return idle end
            return requests[sent]
        end

        function response(status, headers, body)
            if status == 404 then idleAnswers = idleAnswers + 1; return end
            answered = answered + 1
            if answered ~= #requests then return end
            io.open(doneDirectory .. "/" .. id, "w"):close()
            wrk.thread:stop()
            local finished = 0
            for i = 0, threadCount - 1 do
                local marker = io.open(doneDirectory .. "/" .. i, "r")
                if marker then marker:close(); finished = finished + 1 end
            end
            -- popen, not os.execute: system() ignores SIGINT in wrk while it runs.
            if finished == threadCount then io.popen("kill -INT $PPID"):close() end
        end

        function done(summary, latency, requests)
            local idle, answered, shares = 0, 0, {}
            for _, thread in ipairs(threads) do
                idle = idle + thread:get("idleAnswers")
                answered = answered + thread:get("answered")
                shares[#shares + 1] = thread:get("answered") .. "/" .. thread:get("share")
            end
            local e = summary.errors
            io.write(string.format("SIWA-WRK answered=%d duration_us=%d failed=%d p50_us=%d p99_us=%d threads=%s\n",
                answered, summary.duration, e.status - idle + e.connect + e.read + e.write + e.timeout,
                latency:percentile(50), latency:percentile(99), table.concat(shares, ",")))
        end
        """#
}

/// Body files for wrk in the temporary directory, one body per line.
final class BodyFiles {
    private var paths: [String] = []

    func write(_ bodies: some Sequence<Data>) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-bench-bodies-\(getpid())-\(paths.count).txt").path
        var text = Data()
        for body in bodies {
            text.append(body)
            text.append(0x0A)
        }
        try text.write(to: URL(fileURLWithPath: path))
        paths.append(path)
        return path
    }

    func removeAll() {
        for path in paths { try? FileManager.default.removeItem(atPath: path) }
    }
}
