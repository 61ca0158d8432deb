import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Connect
@testable import Framing
@testable import ServerCore
@testable import ServerSeam
@testable import TCP
@testable import TLSStreams
@testable import Transport

/// The loop's hand-over of work from other threads, around its shutdown.
@Suite(.timeLimit(.minutes(1))) struct EventLoopTests {
    /// A wake-up sent after the loop closed aborted the process (libuv writes to a closed fd), and
    /// work accepted after shutdown closed the handles never ran (a `submit` waited forever).
    @Test func workHandedToALoopWhileItShutsDownNeitherCrashesNorRunsAfterIt() async throws {
        for _ in 0..<200 {
            let loop = EventLoop(name: "test-loop")
            let ran = Atomic<Int>(0)
            let stop = Atomic<Bool>(false)
            // Other threads keep handing the loop work while it shuts down.
            let senders = (0..<2).map { _ in
                Thread {
                    while !stop.load(ordering: .relaxed) { loop.execute { ran.add(1, ordering: .relaxed) } }
                }
            }
            senders.forEach { $0.start() }
            while ran.load(ordering: .relaxed) == 0 { usleep(10) }
            loop.shutdown()
            let ranByShutdown = ran.load(ordering: .relaxed)
            usleep(200)
            stop.store(true, ordering: .relaxed)
            #expect(ran.load(ordering: .relaxed) == ranByShutdown, "work ran after shutdown returned")
        }
    }

    @Test func workHandedOverBeforeShutdownRunsAndASecondShutdownReturns() {
        let loop = EventLoop(name: "test-loop")
        let ran = Atomic<Int>(0)
        for _ in 0..<1000 { loop.execute { ran.add(1, ordering: .relaxed) } }
        loop.shutdown()
        #expect(ran.load(ordering: .relaxed) == 1000)
        loop.shutdown()
    }

    /// A loop shut down and released frees what it allocated for itself (its `uv_loop_t`, its own handles, its
    /// 256 KiB read buffer): nothing did, and every server's loops stayed in memory after its shutdown.
    /// malloc's figure is the whole process's: a measure is taken up to three times, as a leak shows in each (40 loops
    /// kept 10.5 MB every time) and what other threads allocate meanwhile rarely in all three.
    @Test func aLoopShutDownAndReleasedFreesItsMemory() async throws {
        for _ in 0..<3 { EventLoop(name: "test-loop").shutdown() }
        try await Task.sleep(for: TestTime.scaled(.milliseconds(100)))  // the loops' threads end and release them
        var kept = 0
        for _ in 0..<3 {
            let before = mallocInUse()
            for _ in 0..<40 { EventLoop(name: "test-loop").shutdown() }
            try await Task.sleep(for: TestTime.scaled(.milliseconds(100)))
            kept = mallocInUse() - before
            if kept < 2 << 20 { break }
        }
        #expect(kept < 2 << 20, "40 loops kept \(kept >> 10) KiB")
    }

    /// The loop's lag: a turn that runs 30 ms of work counts as one turn over 1 and 10 ms (not over
    /// 100), as busy time and as the longest; waiting for I/O in between counts as nothing.
    @Test func aTurnIsMeasuredByItsWorkNotByTheWaitForIO() async throws {
        let loop = EventLoop(name: "test-loop")
        defer { loop.shutdown() }
        _ = loop.submit { 0 }
        // Idle: no turn may take this wait as busy. Stretched with the bound on a busy machine, where a turn can
        // be kept from its core for a while.
        let idle = TestTime.scaled(.milliseconds(200))
        try await Task.sleep(for: idle)
        _ = loop.submit { 0 }
        let quiet = loop.turns.snapshot
        #expect(quiet.turns > 0)
        #expect(
            Duration.milliseconds(quiet.longestMilliseconds) < idle / 2,
            "\(idle) of waiting for I/O was counted as busy")
        _ = loop.submit {
            usleep(30_000)
            return 0
        }
        _ = loop.submit { 0 }  // the turn after ends the long one
        let after = loop.turns.snapshot
        #expect(after.longestMilliseconds >= 30)
        #expect(after.turnsOver[0] - quiet.turnsOver[0] >= 1)
        #expect(after.turnsOver[1] - quiet.turnsOver[1] >= 1)
        #expect(after.turnsOver[2] == quiet.turnsOver[2])
        #expect(after.busySeconds - quiet.busySeconds >= 0.03)
    }
}

/// Bytes malloc has handed out and not had back, over every arena (glibc's `malloc_info`, found at run time: Swift's
/// Glibc module does not declare it).
func mallocInUse() -> Int {
    typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
    guard let symbol = dlsym(nil, "malloc_info") else { return 0 }
    var text: UnsafeMutablePointer<CChar>?
    var length = 0
    guard let stream = open_memstream(&text, &length) else { return 0 }
    _ = unsafeBitCast(symbol, to: MallocInfo.self)(0, stream)
    fclose(stream)
    defer { free(text) }
    let lines = (text.map { String(cString: $0) } ?? "").split(separator: "\n")
    /// The size of the last line starting with `tag`: the totals over every arena come after the arenas'.
    func size(_ tag: String) -> Int {
        guard let line = lines.last(where: { $0.hasPrefix(tag) }), let start = line.range(of: "size=\"")?.upperBound,
            let end = line[start...].firstIndex(of: "\"")
        else { return 0 }
        return Int(line[start..<end]) ?? 0
    }
    return size("<system type=\"current\"") + size("<total type=\"mmap\"") - size("<total type=\"fast\"")
        - size("<total type=\"rest\"")
}
