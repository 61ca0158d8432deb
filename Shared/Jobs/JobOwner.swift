import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The process that runs a job, as recorded beside it, so any replica sharing the database can tell a job
/// whose process is gone from one still running.
///
/// Replicas share one SQLite file in WAL mode, and WAL works only between processes on one machine (they
/// share the `-shm` index in memory), so a job's owner is always a process on this machine, and the
/// operating system can say whether it still lives: the owner is alive while a process with its pid exists
/// *and* started at the same time (a pid reused after a crash belongs to a process that started later).
/// That check is immediate: a replica killed with `kill -9` is seen as dead by the next look, from its own
/// restart or from a sibling replica, without waiting for a lease to run out.
///
/// The check needs the same kernel (boot) and pid namespace: replicas in separate containers sharing a
/// volume cannot see each other's pids. For an owner in another namespace the runner's heartbeat decides
/// instead: it is alive while its `heartbeatAt` is younger than the lease (`JobRunner.Options`).
public struct JobOwner: Sendable, Hashable {
    /// Unique per runner (a process may run more than one, e.g. in tests).
    public var id: String
    /// The kernel boot and pid namespace the pid is valid in.
    public var machine: String
    public var pid: Int32
    /// The process's start time in clock ticks since boot (Linux: /proc/PID/stat field 22); 0 when unknown.
    public var processStart: Int64
    /// Refreshed by the runner while it has active jobs.
    public var heartbeatAt: Date

    public init(id: String, machine: String, pid: Int32, processStart: Int64, heartbeatAt: Date) {
        self.id = id
        self.machine = machine
        self.pid = pid
        self.processStart = processStart
        self.heartbeatAt = heartbeatAt
    }

    /// A new owner for a runner in this process.
    public static func current(now: Date = Date()) -> JobOwner {
        let pid = getpid()
        return JobOwner(
            id: UUID().uuidString.lowercased(), machine: ProcessLiveness.machine, pid: pid,
            processStart: ProcessLiveness.startTime(of: pid) ?? 0, heartbeatAt: now)
    }

    /// Whether this owner's process is still running: by the operating system when it can see the process
    /// (same machine), else by a heartbeat younger than `lease`.
    public func isAlive(now: Date = Date(), lease: TimeInterval) -> Bool {
        if machine == ProcessLiveness.machine {
            guard ProcessLiveness.hasProc else { return ProcessLiveness.exists(pid) }  // not Linux: the pid alone
            return ProcessLiveness.startTime(of: pid) == processStart
        }
        return now.timeIntervalSince(heartbeatAt) < lease
    }
}

/// What the operating system says about processes of this machine.
enum ProcessLiveness {
    static let hasProc = FileManager.default.fileExists(atPath: "/proc/self/stat")

    /// This kernel boot and pid namespace, e.g. `7d0c…/pid:[4026531836]`: pids mean the same process only
    /// within one of these.
    static let machine: String = {
        let boot =
            (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? ProcessInfo.processInfo.hostName
        let namespace = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")) ?? "pid:?"
        return "\(boot)/\(namespace)"
    }()

    /// The start time of process `pid` in clock ticks since boot; nil when it does not exist (or no /proc).
    static func startTime(of pid: Int32) -> Int64? {
        guard hasProc, let data = FileManager.default.contents(atPath: "/proc/\(pid)/stat") else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        // The command name (field 2) is in parentheses and may hold spaces: count fields after its last `)`.
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state), so field 22 (starttime) is fields[19]. A zombie (killed, not yet
        // reaped by its parent) still has its entry but runs nothing.
        guard fields.count > 19, fields[0] != "Z", fields[0] != "X" else { return nil }
        return Int64(fields[19])
    }

    static func exists(_ pid: Int32) -> Bool {
        kill(pid, 0) == 0 || errno == EPERM
    }
}
