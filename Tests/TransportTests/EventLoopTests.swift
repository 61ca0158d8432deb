import Foundation
import Synchronization
import Testing
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
}
